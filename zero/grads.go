package zero

import (
	"context"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// acquireGrads returns the buffer group g's gradients accumulate into
// (n_g elements, indexed from the group's first element). Whole gradients:
// the group's slice of the gradient buffer, accumulating across
// micro-batches. Partitioned ones: a zeroed window (Comm category) that
// gradsReady reduces; with OverlapComm it first waits until fewer than two
// reductions are in flight.
func (e *Engine) acquireGrads(g int) (backend.Buffer, error) {
	gp := e.plan.Groups[g]
	if !e.o.gradsPartitioned() {
		return e.grads.Slice(e.flat.Groups[g].PaddedOff, gp.Len), nil
	}
	if _, ok := e.gradHeld[g]; ok {
		return backend.Buffer{}, e.fail(fmt.Errorf("zero: gradients of group %d acquired twice without a release", g))
	}
	if err := e.reap(e.ctx, reduceDepth-1); err != nil {
		return backend.Buffer{}, err
	}
	win, err := e.gradWindow(gp.Padded)
	if err != nil {
		return backend.Buffer{}, e.fail(err)
	}
	e.be.Zero(win.Slice(0, gp.Padded))
	e.gradHeld[g] = win
	return win.Slice(0, gp.Len), nil
}

// gradsReady says group g's gradients of this micro-batch are complete.
// Whole gradients wait for Step's reduction. Partitioned ones: the window
// is reduce-scattered and this rank's chunk added into the gradient
// partition, queued behind backward with OverlapComm, waited for without.
func (e *Engine) gradsReady(g int) error {
	if !e.o.gradsPartitioned() {
		return nil
	}
	win, ok := e.gradHeld[g]
	if !ok {
		return e.fail(fmt.Errorf("zero: release of group %d's gradients, which are not acquired", g))
	}
	delete(e.gradHeld, g)
	gp := e.plan.Groups[g]
	src := win.Slice(0, gp.Padded)
	out := e.rsOut.Slice(0, gp.Chunk)
	acc := e.pgrad.Slice(gp.PartOff, gp.Chunk)
	op := e.submit(e.ctx, fmt.Sprintf("reduce-scatter gradients of group %d", g), func(ctx context.Context) error {
		if err := e.c.ReduceScatter(ctx, out, src, comm.Sum); err != nil {
			return err
		}
		e.be.Add(acc, acc, out, gp.Chunk)
		return nil
	})
	e.stats.Reductions++
	e.inflight = append(e.inflight, reduction{op: op, win: win})
	if e.o.OverlapComm {
		return nil
	}
	return e.reap(e.ctx, 0)
}

// reap waits, oldest first, until at most keep reductions are in flight,
// and returns the windows of finished reductions (including any that
// finished on their own) to the pool.
func (e *Engine) reap(ctx context.Context, keep int) error {
	for len(e.inflight) > 0 {
		r := e.inflight[0]
		if len(e.inflight) <= keep && !r.op.finished() {
			return nil
		}
		if err := e.wait(ctx, r.op); err != nil {
			return err
		}
		e.inflight = e.inflight[1:]
		e.gradFree = append(e.gradFree, r.win)
	}
	return nil
}

// gradWindow returns a free window of at least n elements, the smallest
// that fits, or a new one. The pool grows only to the largest set of
// windows in use at once (for the model's call order: the embeddings'
// window held through backward when the head is tied, the final group's,
// and a block's per reduction in flight plus the one being filled).
func (e *Engine) gradWindow(n int) (backend.Buffer, error) {
	best := -1
	for i, w := range e.gradFree {
		if w.Len() >= n && (best < 0 || w.Len() < e.gradFree[best].Len()) {
			best = i
		}
	}
	if best >= 0 {
		w := e.gradFree[best]
		e.gradFree = append(e.gradFree[:best], e.gradFree[best+1:]...)
		return w, nil
	}
	w, err := e.be.Alloc(backend.Device, backend.Comm, e.o.GradAccumDType, n)
	if err != nil {
		return w, fmt.Errorf("zero: allocate a gradient window of %d × %s: %w", n, e.o.GradAccumDType, err)
	}
	return w, nil
}

// ZeroGrad clears the gradients (and the gradient partition) for a new
// step, after waiting for reductions still in flight. Step also clears them
// once it has used them.
func (e *Engine) ZeroGrad() error {
	if err := e.usable(); err != nil {
		return err
	}
	if err := e.reap(e.ctx, 0); err != nil {
		return err
	}
	e.zeroGrads()
	return nil
}

func (e *Engine) zeroGrads() {
	if !e.grads.IsNil() {
		e.be.Zero(e.grads)
	}
	if !e.pgrad.IsNil() {
		e.be.Zero(e.pgrad)
	}
}
