package zero

import (
	"context"
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// InitParams sets the parameters (and master weights) from host values,
// one group at a time: values(g) returns group g's n_g values, indexed from
// the group's first element (model.InitGroup, or a slice of loaded
// weights). Stage 3 keeps only this rank's chunk of each group (and
// persistent groups whole), so no rank ever holds the whole model. Call it
// before the first step; it issues no collectives.
func (e *Engine) InitParams(values func(g int) ([]float32, error)) error {
	if err := e.usable(); err != nil {
		return err
	}
	if err := e.dropWindows(); err != nil { // stage 3: gathered windows would go stale
		return err
	}
	for g, gp := range e.plan.Groups {
		host, err := values(g)
		if err != nil {
			return fmt.Errorf("zero: initial values of group %d: %w", g, err)
		}
		if len(host) != gp.Len {
			return fmt.Errorf("zero: initial values of group %d: %d values for %d parameters", g, len(host), gp.Len)
		}
		if err := e.initGroup(g, host); err != nil {
			return fmt.Errorf("zero: initialize group %d: %w", g, err)
		}
	}
	return e.be.Sync()
}

func (e *Engine) initGroup(g int, host []float32) error {
	gp := e.plan.Groups[g]
	if !e.o.paramsPartitioned() {
		off := e.flat.Groups[g].PaddedOff
		if err := backend.WriteF32(e.be, e.params.Slice(off, gp.Len), host); err != nil {
			return err
		}
		if !e.o.statePartitioned() || e.o.Inference {
			if e.master.IsNil() {
				return nil
			}
			return backend.WriteF32(e.be, e.master.Slice(off, gp.Len), host)
		}
	}
	lo, n := e.plan.Owned(g, e.rank)
	chunk := make([]float32, gp.Chunk) // the padding past the real elements stays zero
	copy(chunk, host[lo:lo+n])
	if !e.master.IsNil() {
		if err := backend.WriteF32(e.be, e.master.Slice(gp.PartOff, gp.Chunk), chunk); err != nil {
			return err
		}
	}
	if !e.o.paramsPartitioned() {
		return nil
	}
	if err := backend.WriteF32(e.be, e.params.Slice(gp.PartOff, gp.Chunk), chunk); err != nil {
		return err
	}
	if e.persistent[g] {
		return backend.WriteF32(e.be, e.persistBuf[g].Slice(0, gp.Len), host)
	}
	return nil
}

// HostParams returns every parameter on the host in the flat layout
// (widened to float32), gathering stage-3 groups one at a time so no more
// than one non-persistent group is ever whole on the device. Every rank
// must call it (stage 3 issues collectives), between steps.
func (e *Engine) HostParams(ctx context.Context) ([]float32, error) {
	if err := e.usable(); err != nil {
		return nil, err
	}
	out := make([]float32, e.total)
	for g, gr := range e.groups {
		vals, err := e.hostGroup(ctx, g)
		if err != nil {
			return nil, err
		}
		copy(out[gr.Off:gr.Off+gr.Len], vals)
	}
	return out, nil
}

func (e *Engine) hostGroup(ctx context.Context, g int) ([]float32, error) {
	gp := e.plan.Groups[g]
	if err := e.be.Sync(); err != nil {
		return nil, e.fail(fmt.Errorf("zero: read group %d: %w", g, err))
	}
	switch {
	case !e.o.paramsPartitioned():
		return backend.ReadF32(e.be, e.params.Slice(e.flat.Groups[g].PaddedOff, gp.Len))
	case e.persistent[g]:
		return backend.ReadF32(e.be, e.persistBuf[g].Slice(0, gp.Len))
	}
	buf, err := e.be.Alloc(backend.Device, backend.Params, e.o.ParamDType, gp.Padded)
	if err != nil {
		return nil, fmt.Errorf("zero: allocate the gathered parameters of group %d: %w", g, err)
	}
	op := e.submit(ctx, fmt.Sprintf("all-gather parameters of group %d for the host", g), func(ctx context.Context) error {
		return e.allGatherChunk(ctx, buf, g)
	})
	if err := e.wait(ctx, op); err != nil {
		// The gather may still be writing buf: Close frees it once the comm
		// goroutine has exited.
		e.allocations = append(e.allocations, buf)
		return nil, err
	}
	defer e.be.Free(buf)
	return backend.ReadF32(e.be, buf.Slice(0, gp.Len))
}

// HostGrads returns this rank's gradients as accumulated so far, before
// Step reduces them, on the host in the flat layout (widened to float32):
// for engines whose gradients are whole (stages 0–1), the buffer backward
// adds into. Tests and tools use it to look at a backward pass.
func (e *Engine) HostGrads() ([]float32, error) {
	if err := e.usable(); err != nil {
		return nil, err
	}
	if e.grads.IsNil() {
		return nil, errors.New("zero: gradients are partitioned (stages 2–3) or absent (inference); only whole gradients can be read back")
	}
	if err := e.be.Sync(); err != nil {
		return nil, e.fail(fmt.Errorf("zero: read gradients: %w", err))
	}
	out := make([]float32, e.total)
	for g, gr := range e.groups {
		vals, err := backend.ReadF32(e.be, e.grads.Slice(e.flat.Groups[g].PaddedOff, gr.Len))
		if err != nil {
			return nil, err
		}
		copy(out[gr.Off:gr.Off+gr.Len], vals)
	}
	return out, nil
}
