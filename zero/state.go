package zero

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// The kinds of state ExportState writes and RestoreState reads, each a
// float32 value per element of the model's flat layout. They are the
// checkpoint package's kind names.
const (
	StateParams   = "params"     // fp32 master values (the parameters themselves where there is no master)
	StateExpAvg   = "exp_avg"    // AdamW's first moment
	StateExpAvgSq = "exp_avg_sq" // AdamW's second moment
)

// ExportState hands this rank's share of the optimizer state to write, one
// call per kind and owned range: flatOff is the range's first element in
// the model's flat layout and vals its values (len(vals) elements, valid
// only during the call). Stages ≥ 1 write the rank's chunk of every group,
// padding excluded, so the ranks' ranges tile the layout and no rank reads
// more than one chunk at a time; stage 0's state is replicated, so rank 0
// writes every group and the other ranks nothing. Offloaded state is read
// from the host pool the same way. Every rank calls it between steps (no
// gradients acquired); it waits for any reduction still in flight and
// issues no collectives.
func (e *Engine) ExportState(write func(kind string, flatOff int, vals []float32) error) error {
	if err := e.quiesce("export"); err != nil {
		return err
	}
	if e.o.Stage == 0 && e.rank != 0 {
		return nil
	}
	for g, gr := range e.groups {
		off, n, at := e.stateRange(g)
		if n == 0 {
			continue
		}
		params := e.master
		if params.IsNil() { // stage 0, fp32 parameters: updated in place
			params = e.params
		}
		for _, k := range []struct {
			kind string
			buf  backend.Buffer
		}{{StateParams, params}, {StateExpAvg, e.m}, {StateExpAvgSq, e.v}} {
			vals, err := backend.ReadF32(e.be, k.buf.Slice(at, n))
			if err != nil {
				return fmt.Errorf("zero: read %s of group %d: %w", k.kind, g, err)
			}
			if err := write(k.kind, gr.Off+off, vals); err != nil {
				return fmt.Errorf("zero: write %s of group %d (flat [%d, %d)): %w", k.kind, g, gr.Off+off, gr.Off+off+n, err)
			}
		}
	}
	return nil
}

// RestoreState sets the master weights, the AdamW moments and the
// parameters (the master rounded to ParamDType) from read, which returns
// the n values of a kind starting at flat element flatOff. It replaces
// InitParams: every rank calls it after New and before the first step,
// and it reads what the engine's own world size and stage give it, whatever
// layout wrote the values. The master and moments come from the rank's
// chunks (stage 0: every group). The parameters every rank holds whole —
// stages 0–2, and stage 3's persistent groups — are read whole by every
// rank rather than gathered, so it issues no collectives and each rank's
// copy is rounded from the same values; a stage-3 partition is rounded from
// the rank's master chunk. With the world size and stage of the export the
// engine ends up exactly as it was, so the next steps are bit-identical.
func (e *Engine) RestoreState(read func(kind string, flatOff, n int) ([]float32, error)) error {
	if err := e.quiesce("restore"); err != nil {
		return err
	}
	if err := e.dropWindows(); err != nil { // stage 3: gathered windows would go stale
		return err
	}
	for g := range e.groups {
		if err := e.restoreGroup(g, read); err != nil {
			return err
		}
	}
	if err := e.be.Sync(); err != nil {
		return e.fail(fmt.Errorf("zero: restore: %w", err))
	}
	return nil
}

func (e *Engine) restoreGroup(g int, read func(kind string, flatOff, n int) ([]float32, error)) error {
	gr, gp := e.groups[g], e.plan.Groups[g]
	get := func(kind string, off, n int) ([]float32, error) {
		if n == 0 {
			return nil, nil
		}
		vals, err := read(kind, gr.Off+off, n)
		if err != nil {
			return nil, fmt.Errorf("zero: read %s of group %d (flat [%d, %d)): %w", kind, g, gr.Off+off, gr.Off+off+n, err)
		}
		if len(vals) != n {
			return nil, fmt.Errorf("zero: read %s of group %d (flat [%d, %d)): %d values for %d elements", kind, g, gr.Off+off, gr.Off+off+n, len(vals), n)
		}
		return vals, nil
	}
	put := func(dst backend.Buffer, vals []float32, what string) error {
		if err := backend.WriteF32(e.be, dst, vals); err != nil {
			return fmt.Errorf("zero: restore %s of group %d: %w", what, g, err)
		}
		return nil
	}
	off, n, at := e.stateRange(g)
	// A stage ≥ 1 state chunk is written whole so its padding is zero
	// whatever the buffer held; stage 0 has no padding.
	width := n
	if e.o.Stage >= 1 {
		width = gp.Chunk
	}
	chunkOf := func(vals []float32) []float32 {
		c := make([]float32, width)
		copy(c, vals)
		return c
	}
	for _, k := range []struct {
		kind string
		buf  backend.Buffer
	}{{StateExpAvg, e.m}, {StateExpAvgSq, e.v}} {
		vals, err := get(k.kind, off, n)
		if err != nil {
			return err
		}
		if err := put(k.buf.Slice(at, width), chunkOf(vals), k.kind); err != nil {
			return err
		}
	}
	// The parameters every rank holds whole: read whole.
	full := e.o.Stage <= 2 || e.keep[g]
	var whole []float32
	if full {
		var err error
		if whole, err = get(StateParams, 0, gp.Len); err != nil {
			return err
		}
		var dst backend.Buffer
		if e.o.Stage <= 2 {
			dst = e.params.Slice(e.res.Groups[g].PaddedOff, gp.Len)
		} else {
			dst = e.whole[g].Slice(0, gp.Len)
		}
		if err := put(dst, whole, "parameters"); err != nil {
			return err
		}
	}
	var mine []float32
	if full {
		mine = whole[off : off+n]
	} else {
		var err error
		if mine, err = get(StateParams, off, n); err != nil {
			return err
		}
	}
	if !e.master.IsNil() {
		if err := put(e.master.Slice(at, width), chunkOf(mine), "master weights"); err != nil {
			return err
		}
	}
	if e.o.Stage == 3 {
		return put(e.params.Slice(at, width), chunkOf(mine), "parameter partition")
	}
	return nil
}

// stateRange is the part of group g whose optimizer state this rank holds:
// group-relative elements [off, off+n) at element at of the state buffers
// (master, moments). Stage 0: the whole group at its flat offset.
func (e *Engine) stateRange(g int) (off, n, at int) {
	if e.o.Stage == 0 {
		return 0, e.groups[g].Len, e.res.Groups[g].PaddedOff
	}
	off, n = e.plan.Owned(g, e.rank)
	return off, n, e.plan.Groups[g].PartOff
}

// quiesce finishes the reductions still in flight and syncs the backend, so
// the state buffers can be read or written from the host. A group whose
// gradients are acquired means a pass is under way.
func (e *Engine) quiesce(what string) error {
	if err := e.usable(); err != nil {
		return err
	}
	for g := range e.gradHeld {
		return fmt.Errorf("zero: %s of the optimizer state while group %d's gradients are acquired; call it between steps", what, g)
	}
	if err := e.reap(e.ctx, 0); err != nil {
		return err
	}
	if err := e.be.Sync(); err != nil {
		return e.fail(fmt.Errorf("zero: %s of the optimizer state: %w", what, err))
	}
	return nil
}
