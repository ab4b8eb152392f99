package zero

import (
	"errors"
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
	if e.o.Inference {
		return errors.New("zero: an inference engine holds no optimizer state to export")
	}
	if !e.o.statePartitioned() && e.rank != 0 {
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
	rg := groupRestore{e: e, g: g, read: read}
	off, n, at := e.stateRange(g)
	// A partitioned state chunk is written whole so its padding is zero
	// whatever the buffer held; whole state has no padding.
	rg.width = n
	if e.o.statePartitioned() {
		rg.width = e.plan.Groups[g].Chunk
	}
	if !e.m.IsNil() {
		for _, k := range []struct {
			kind string
			buf  backend.Buffer
		}{{StateExpAvg, e.m}, {StateExpAvgSq, e.v}} {
			vals, err := rg.get(k.kind, off, n)
			if err != nil {
				return err
			}
			if err := rg.put(k.buf.Slice(at, rg.width), rg.chunkOf(vals), k.kind); err != nil {
				return err
			}
		}
	}
	mine, err := rg.params(off, n)
	if err != nil {
		return err
	}
	if !e.master.IsNil() {
		if err := rg.put(e.master.Slice(at, rg.width), rg.chunkOf(mine), "master weights"); err != nil {
			return err
		}
	}
	if e.o.paramsPartitioned() {
		return rg.put(e.params.Slice(at, rg.width), rg.chunkOf(mine), "parameter partition")
	}
	return nil
}

// groupRestore reads and writes one group's state for RestoreState.
type groupRestore struct {
	e     *Engine
	g     int
	read  func(kind string, flatOff, n int) ([]float32, error)
	width int // elements of the state buffers' chunk
}

// get reads n values of kind at group-relative element off.
func (rg groupRestore) get(kind string, off, n int) ([]float32, error) {
	if n == 0 {
		return nil, nil
	}
	gr := rg.e.groups[rg.g]
	vals, err := rg.read(kind, gr.Off+off, n)
	if err != nil {
		return nil, fmt.Errorf("zero: read %s of group %d (flat [%d, %d)): %w", kind, rg.g, gr.Off+off, gr.Off+off+n, err)
	}
	if len(vals) != n {
		return nil, fmt.Errorf("zero: read %s of group %d (flat [%d, %d)): %d values for %d elements", kind, rg.g, gr.Off+off, gr.Off+off+n, len(vals), n)
	}
	return vals, nil
}

func (rg groupRestore) put(dst backend.Buffer, vals []float32, what string) error {
	if err := backend.WriteF32(rg.e.be, dst, vals); err != nil {
		return fmt.Errorf("zero: restore %s of group %d: %w", what, rg.g, err)
	}
	return nil
}

// chunkOf pads vals with zeros to the chunk width.
func (rg groupRestore) chunkOf(vals []float32) []float32 {
	c := make([]float32, rg.width)
	copy(c, vals)
	return c
}

// params restores the parameters every rank holds whole (whole parameters,
// and the persistent groups), read whole, and returns the values of this
// rank's range [off, off+n), read alone when the group is partitioned.
func (rg groupRestore) params(off, n int) ([]float32, error) {
	e, g := rg.e, rg.g
	gp := e.plan.Groups[g]
	if e.o.paramsPartitioned() && !e.persistent[g] {
		return rg.get(StateParams, off, n)
	}
	whole, err := rg.get(StateParams, 0, gp.Len)
	if err != nil {
		return nil, err
	}
	dst := e.persistBuf[g]
	if !e.o.paramsPartitioned() {
		dst = e.params.Slice(e.flat.Groups[g].PaddedOff, gp.Len)
	}
	if err := rg.put(dst.Slice(0, gp.Len), whole, "parameters"); err != nil {
		return nil, err
	}
	return whole[off : off+n], nil
}

// stateRange is the part of group g whose optimizer state this rank holds:
// group-relative elements [off, off+n) at element at of the state buffers
// (master, moments). Stage 0: the whole group at its flat offset.
func (e *Engine) stateRange(g int) (off, n, at int) {
	if !e.o.statePartitioned() {
		return 0, e.groups[g].Len, e.flat.Groups[g].PaddedOff
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
