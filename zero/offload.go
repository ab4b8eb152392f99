package zero

import (
	"context"
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// offloadPool is where offloaded state lives: the device when it is not
// offloaded, else page-locked or ordinary host memory.
func offloadPool(offload, pinned bool) backend.Pool {
	switch {
	case !offload:
		return backend.Device
	case pinned:
		return backend.HostPinned
	}
	return backend.Host
}

// allGatherChunk all-gathers group g's chunk of the stage-3 parameter
// partition into dst (Padded long, on the device). With OffloadParam the
// chunk is first copied from the host into paramIn, the device buffer
// collectives read from. It runs on the comm goroutine, the only user of
// paramIn, so one such buffer serves every gather however many are queued.
func (e *Engine) allGatherChunk(ctx context.Context, dst backend.Buffer, g int) error {
	gp := e.plan.Groups[g]
	src := e.params.Slice(gp.PartOff, gp.Chunk)
	if e.o.OffloadParam {
		in := e.paramIn.Slice(0, gp.Chunk)
		e.be.Copy(in, src)
		src = in
	}
	return e.c.AllGather(ctx, dst, src)
}

// updateGroup runs AdamW on this rank's share of group g and leaves the
// updated parameters in the first n elements of dst (group g's chunk where
// the parameters are gathered from: a stage 1–2 staging chunk on the
// device, or the stage-3 partition, on the host with OffloadParam); n is
// the rank's real elements of the group, and the rest of dst is not
// written. hp[0] is for tensors without weight decay, hp[1] with.
//
// AdamW runs where the master and moments are. With OffloadOptimizer that
// is host memory: the reduced gradient chunk is copied out to gradOut
// first (cast to F32 if it accumulates in 16 bits, which AdamW would do
// anyway, so the update is the same bit for bit). When the parameters
// live on the other side of the host/device boundary AdamW writes the
// rounded parameters into newOut and they are copied over. The backend's
// AdamW runs the host update: on the CPU backend every pool is host
// memory; a GPU backend would need a host AdamW over the pinned buffers
// here. The Syncs order the host's reads after the copies queued before
// them, and the next group's writes into gradOut and newOut after the copy
// out of them; they cost nothing on the CPU backend.
func (e *Engine) updateGroup(g int, dst backend.Buffer, hp [2]backend.AdamWParams) (n int, err error) {
	gp := e.plan.Groups[g]
	_, n = e.plan.Owned(g, e.rank)
	if n == 0 {
		return 0, nil
	}
	grad, gradOff := e.pgrad, 0 // gradOff: where the group's chunk starts in grad, less PartOff
	if e.o.OffloadOptimizer {
		e.be.Copy(e.gradOut.Slice(0, n), e.pgrad.Slice(gp.PartOff, n))
		if err := e.be.Sync(); err != nil {
			return 0, e.fail(fmt.Errorf("zero: copy the gradients of group %d out: %w", g, err))
		}
		grad, gradOff = e.gradOut, -gp.PartOff
	}
	out := dst
	if !e.newOut.IsNil() {
		out = e.newOut
	}
	for _, s := range e.segs[g] {
		p := hp[0]
		if s.decay {
			p = hp[1]
		}
		e.be.AdamW(out.Slice(s.off-gp.PartOff, s.n), e.master.Slice(s.off, s.n), grad.Slice(s.off+gradOff, s.n),
			e.m.Slice(s.off, s.n), e.v.Slice(s.off, s.n), p)
	}
	if !e.newOut.IsNil() {
		e.be.Copy(dst.Slice(0, n), e.newOut.Slice(0, n))
		if err := e.be.Sync(); err != nil {
			return 0, e.fail(fmt.Errorf("zero: copy the parameters of group %d back: %w", g, err))
		}
	}
	return n, nil
}
