package zero

import (
	"context"
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// reduceDepth is how many gradient reductions may be in flight with
// OverlapComm: two, so backward fills one window while the previous one is
// reduced.
const reduceDepth = 2

// Engine runs one rank's share of ZeRO data parallelism for a model whose
// parameters are laid out flat and cut into groups. It implements the
// model's ParamStore (AcquireParams, ReleaseParams, AcquireGrads,
// GradsReady) and the optimizer step.
//
// An Engine is driven by one goroutine at a time (the trainer's). It owns a
// second goroutine that issues every collective, in submission order; while
// it runs, backend work (the Comm's transfers, gradient accumulation) may
// execute on it concurrently with the caller's backend work on other
// buffers. Every rank must make the same calls in the same order.
type Engine struct {
	be     backend.Backend
	c      comm.Comm
	o      Options
	ctx    context.Context // bounds the collectives ParamStore calls issue
	groups []Group
	order  [2][]int // the model's acquisition order: [0] forward, [1] backward
	pos    [2][]int // each group's index in order[0] and order[1]
	total  int      // elements of the flat layout
	rank   int

	plan Plan        // the groups over the world: partitions, chunks
	flat Plan        // the layout of the buffers held whole: plan, or unpadded (world 1) when the state is replicated
	segs [][]segment // AdamW runs by group, offsets into the state buffers

	// persistent marks the groups a partitioned-parameter engine keeps whole
	// on every rank (stage3_param_persistence_threshold); persistBuf holds
	// them (Padded long; the zero Buffer for the others).
	persistent []bool
	persistBuf []backend.Buffer

	optPool   backend.Pool // where master and moments live: Device, or a host pool with OffloadOptimizer
	paramPool backend.Pool // where the parameter partition lives: Device, or a host pool with OffloadParam

	params  backend.Buffer    // whole (flat layout), or this rank's partition when partitioned (paramPool)
	grads   backend.Buffer    // gradients accumulated locally, whole (flat layout); zero when partitioned
	pgrad   backend.Buffer    // this rank's partition of the reduced gradients (state partitioned)
	master  backend.Buffer    // fp32 master: this rank's partition, or whole when replicated (and only for 16-bit params); optPool
	m, v    backend.Buffer    // AdamW moments, same length as the state buffers, optPool
	staging [2]backend.Buffer // whole parameters: updated chunks on their way to the all-gather
	gradOut backend.Buffer    // OffloadOptimizer: one group's reduced gradient chunk, copied out (F32, optPool)
	newOut  backend.Buffer    // one group's updated chunk where AdamW wrote it, when that is not the pool the parameters live in
	paramIn backend.Buffer    // OffloadParam: one chunk copied in for an all-gather (device; comm goroutine only)
	rsOut   backend.Buffer    // partitioned gradients: a reduced chunk before it is accumulated
	sqOne   backend.Buffer    // one rank's float64 sum of squares as two I32 words
	sqAll   backend.Buffer    // every rank's, gathered

	loop       *commLoop
	sharedLoop bool // the loop is another engine's (NewBeside): Close leaves it running

	gradFree []backend.Buffer       // reduction windows not in use
	gradHeld map[int]backend.Buffer // windows the model is filling
	inflight []reduction            // queued reductions, oldest first

	live        map[int]*paramWindow // partitioned parameters: gathered groups
	backward    bool                 // the pass of the last acquisition
	at          int                  // and the acquired group's index in that pass's order
	liveElems   int
	aheadElems  int
	stats       Stats
	err         error // sticky: the engine is unusable
	closed      bool
	allocations []backend.Buffer // every resident allocation, freed by Close
}

// reduction is a queued gradient reduction and the window it reads.
type reduction struct {
	op  *commOp
	win backend.Buffer
}

// Stats counts what the engine did, for tests and metrics.
type Stats struct {
	Gathers          int // stage-3 parameter all-gathers for the model, prefetches included
	Prefetches       int // gathers issued ahead of the group's acquisition
	LiveElements     int // gathered parameter elements held now (padded)
	PeakLiveElements int // the most held at once since New
	Reductions       int // stage-2/3 gradient reduce-scatters issued by GradsReady
}

// New builds rank c.Rank()'s engine for the parameters lay describes and
// allocates its resident state: parameters, gradients, master weights and
// AdamW moments as the stage says, on be's device pool except what the
// offload options put in a host pool (see the package documentation).
// Parameters start at zero; call InitParams. ctx bounds the collectives
// issued by the ParamStore methods, which take no context.
func New(ctx context.Context, be backend.Backend, c comm.Comm, lay Layout, o Options) (*Engine, error) {
	return newEngine(ctx, be, c, lay, o, nil)
}

// NewBeside builds a second engine for another set of parameters on
// first's backend and Comm (LoRA: the adapters beside a Frozen base). Its
// collectives go through first's comm goroutine, so the two engines'
// collectives keep the order the caller issues them in on every rank; two
// engines with goroutines of their own would interleave them at random on
// the one Comm. Close it before first.
func NewBeside(first *Engine, lay Layout, o Options) (*Engine, error) {
	if err := first.usable(); err != nil {
		return nil, err
	}
	o.LazyComm = first.o.LazyComm
	return newEngine(first.ctx, first.be, first.c, lay, o, first.loop)
}

func newEngine(ctx context.Context, be backend.Backend, c comm.Comm, lay Layout, o Options, loop *commLoop) (*Engine, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	total, err := lay.check()
	if err != nil {
		return nil, err
	}
	groups := lay.Groups
	sizes := make([]int, len(groups))
	for g, gr := range groups {
		sizes[g] = gr.Len
	}
	e := &Engine{
		be: be, c: c, o: o, ctx: ctx, groups: groups, total: total, rank: c.Rank(),
		order:      [2][]int{lay.Forward, lay.Backward},
		pos:        [2][]int{inverse(lay.Forward), inverse(lay.Backward)},
		plan:       NewPlan(sizes, c.Size()),
		gradHeld:   map[int]backend.Buffer{},
		live:       map[int]*paramWindow{},
		persistent: make([]bool, len(groups)),
		persistBuf: make([]backend.Buffer, len(groups)),
		optPool:    offloadPool(o.OffloadOptimizer, o.OffloadOptimizerPinned),
		paramPool:  offloadPool(o.OffloadParam, o.OffloadParamPinned),
	}
	e.flat = e.plan
	if o.statePartitioned() {
		e.segs = segments(groups, e.plan, e.rank)
	} else {
		e.flat = NewPlan(sizes, 1)
		e.segs = segments(groups, e.flat, 0)
	}
	if err := e.allocate(); err != nil {
		e.free()
		return nil, err
	}
	e.loop, e.sharedLoop = loop, loop != nil
	if loop == nil {
		e.loop = newCommLoop(o.LazyComm)
	}
	return e, nil
}

// allocate makes every resident buffer of the stage.
func (e *Engine) allocate() error {
	steps := []func() error{e.allocParams, e.allocGrads}
	if !e.o.Inference {
		steps = append(steps, e.allocOptimizer)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// alloc makes one resident buffer, freed by Close.
func (e *Engine) alloc(pool backend.Pool, cat backend.Category, dt backend.DType, n int, what string) (backend.Buffer, error) {
	b, err := e.be.Alloc(pool, cat, dt, n)
	if err != nil {
		return b, fmt.Errorf("zero: allocate %s (%d × %s in the %s pool): %w", what, n, dt, pool, err)
	}
	e.allocations = append(e.allocations, b)
	return b, nil
}

// maxChunk is the largest group chunk: the size of every per-group buffer.
func (e *Engine) maxChunk() int {
	n := 0
	for _, gp := range e.plan.Groups {
		n = max(n, gp.Chunk)
	}
	return n
}

// allocParams makes the parameters: whole (padded when the state is
// partitioned, so a group's range is the destination of its all-gather),
// with the staging chunks an all-gather of updated chunks needs; or, when
// partitioned, this rank's partition, the persistent groups whole, and the
// device chunk an offloaded partition is copied into for its gather.
func (e *Engine) allocParams() error {
	o, plan := e.o, e.plan
	var err error
	if !o.paramsPartitioned() {
		if e.params, err = e.alloc(backend.Device, backend.Params, o.ParamDType, e.flat.PaddedLen, "parameters"); err != nil {
			return err
		}
		if !o.statePartitioned() || o.Inference {
			return nil
		}
		for i := range e.staging {
			if e.staging[i], err = e.alloc(backend.Device, backend.Comm, o.ParamDType, e.maxChunk(), "all-gather staging"); err != nil {
				return err
			}
		}
		return nil
	}
	if e.params, err = e.alloc(e.paramPool, backend.Params, o.ParamDType, plan.PartLen, "parameter partition"); err != nil {
		return err
	}
	if o.OffloadParam {
		if e.paramIn, err = e.alloc(backend.Device, backend.Comm, o.ParamDType, e.maxChunk(), "parameter chunk copied in"); err != nil {
			return err
		}
	}
	for g, gp := range plan.Groups {
		if int64(gp.Len) <= o.PersistenceThreshold {
			e.persistent[g] = true
			if e.persistBuf[g], err = e.alloc(backend.Device, backend.Params, o.ParamDType, gp.Padded, fmt.Sprintf("persistent group %d", g)); err != nil {
				return err
			}
		}
	}
	return nil
}

// allocGrads makes the gradient buffers: whole, accumulating locally until
// Step reduces them; or only this rank's partition, with the buffer a
// reduce-scatter writes each group's chunk into. Reduction windows come
// later, as the model acquires gradients. An inference engine has none.
func (e *Engine) allocGrads() error {
	o := e.o
	if o.Inference {
		return nil
	}
	var err error
	if !o.gradsPartitioned() {
		if e.grads, err = e.alloc(backend.Device, backend.Grads, o.GradAccumDType, e.flat.PaddedLen, "gradients"); err != nil {
			return err
		}
	}
	if !o.statePartitioned() {
		return nil
	}
	if e.pgrad, err = e.alloc(backend.Device, backend.Grads, o.GradAccumDType, e.plan.PartLen, "gradient partition"); err != nil {
		return err
	}
	if o.gradsPartitioned() {
		if e.rsOut, err = e.alloc(backend.Device, backend.Comm, o.GradAccumDType, e.maxChunk(), "reduce-scatter output"); err != nil {
			return err
		}
	}
	return nil
}

// allocOptimizer makes what AdamW reads and writes: the fp32 master (this
// rank's partition; replicated, whole and only for 16-bit parameters), the
// moments, the chunks that carry a group's gradients and new parameters
// across the host/device boundary when they live on different sides, and
// the global-norm exchange.
func (e *Engine) allocOptimizer() error {
	o := e.o
	state := e.plan.PartLen
	var err error
	if !o.statePartitioned() {
		state = e.total
		if o.ParamDType != backend.F32 {
			if e.master, err = e.alloc(backend.Device, backend.Master, backend.F32, e.total, "master weights"); err != nil {
				return err
			}
		}
	} else {
		if e.master, err = e.alloc(e.optPool, backend.Master, backend.F32, state, "master partition"); err != nil {
			return err
		}
		if o.OffloadOptimizer {
			if e.gradOut, err = e.alloc(e.optPool, backend.Comm, backend.F32, e.maxChunk(), "gradient chunk copied out"); err != nil {
				return err
			}
		}
		// AdamW writes where the optimizer state is; when the parameters
		// live on the other side of the host/device boundary the update
		// goes through a chunk there and is copied over.
		if paramsOnDevice := !o.paramsPartitioned() || !o.OffloadParam; paramsOnDevice == o.OffloadOptimizer {
			if e.newOut, err = e.alloc(e.optPool, backend.Comm, o.ParamDType, e.maxChunk(), "updated parameter chunk"); err != nil {
				return err
			}
		}
	}
	if e.m, err = e.alloc(e.optPool, backend.Optimizer, backend.F32, state, "AdamW first moment"); err != nil {
		return err
	}
	if e.v, err = e.alloc(e.optPool, backend.Optimizer, backend.F32, state, "AdamW second moment"); err != nil {
		return err
	}
	if e.sqOne, err = e.alloc(backend.Device, backend.Comm, backend.I32, 2, "norm exchange"); err != nil {
		return err
	}
	e.sqAll, err = e.alloc(backend.Device, backend.Comm, backend.I32, 2*e.plan.World, "norm exchange")
	return err
}

// usable is the check at the top of every call: the first failure of the
// engine or its comm goroutine, or a closed engine.
func (e *Engine) usable() error {
	if e.closed {
		return errors.New("zero: the engine is closed")
	}
	if e.err != nil {
		return e.err
	}
	if err := e.loop.failure(); err != nil {
		e.err = err
		return err
	}
	return nil
}

// fail makes err sticky and returns it.
func (e *Engine) fail(err error) error {
	if e.err == nil {
		e.err = err
	}
	return err
}

// submit queues a collective under ctx, bounded by Options.Timeout.
func (e *Engine) submit(ctx context.Context, what string, run func(context.Context) error) *commOp {
	return e.loop.submit(ctx, what, func(ctx context.Context) error {
		if e.o.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, e.o.Timeout)
			defer cancel()
		}
		return run(ctx)
	})
}

// wait blocks until op is done or ctx ends. A wait cut short leaves this
// rank unable to issue the collectives its peers expect, so it aborts the
// Comm (which also ends the op, if it is running) and the engine fails.
func (e *Engine) wait(ctx context.Context, op *commOp) error {
	e.loop.drive(op)
	select {
	case <-op.done:
		if op.err != nil {
			return e.fail(op.err)
		}
		return nil
	case <-ctx.Done():
		err := fmt.Errorf("zero: waiting for %s: %w", op.what, context.Cause(ctx))
		e.c.Abort(err)
		return e.fail(err)
	}
}

// Collective runs f on the engine's comm goroutine after every collective
// queued before it, and waits for it. The trainer's own collectives (the
// loss average, a barrier) go through it so they can never interleave with
// the engine's. f must use c only for collectives every rank issues.
func (e *Engine) Collective(ctx context.Context, what string, f func(ctx context.Context, c comm.Comm) error) error {
	if err := e.usable(); err != nil {
		return err
	}
	op := e.submit(ctx, what, func(ctx context.Context) error { return f(ctx, e.c) })
	return e.wait(ctx, op)
}

// Stage is the ZeRO stage the engine runs.
func (e *Engine) Stage() int { return e.o.Stage }

// Plan is how the groups are partitioned over the world.
func (e *Engine) Plan() Plan { return e.plan }

// Partition lists the pieces of each group whose optimizer state this rank
// holds, with their offsets into Master, M and V: its chunks for stages ≥ 1,
// every group whole (offsets in the flat layout) for stage 0.
func (e *Engine) Partition() []ChunkRange {
	if !e.o.statePartitioned() {
		return e.flat.Chunks(0)
	}
	return e.plan.Chunks(e.rank)
}

// Master is the fp32 master copy of the parameters Partition describes (the
// zero Buffer for stage 0 with fp32 parameters, which updates them in
// place), in a host pool with OffloadOptimizer. The engine owns it; read it
// between steps only.
func (e *Engine) Master() backend.Buffer { return e.master }

// Moments are AdamW's first and second moments (F32) of the parameters
// Partition describes, in a host pool with OffloadOptimizer. The engine
// owns them; read them between steps only.
func (e *Engine) Moments() (m, v backend.Buffer) { return e.m, e.v }

// Stats reports the engine's counters so far.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.LiveElements = e.liveElems
	return s
}

// Close waits for the comm goroutine and frees everything the engine
// allocated. Collectives still queued (a pass abandoned after an error)
// mean the ranks' sequences have diverged, so Close aborts the Comm first
// rather than wait out their deadlines. Close does not close the Comm.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	if e.sharedLoop {
		// Wait for this engine's queued work, which may read its buffers.
		done := e.submit(e.ctx, "close", func(context.Context) error { return nil })
		e.loop.drive(done)
		<-done.done
	} else {
		if e.loop.busy() {
			e.c.Abort(errors.New("zero: engine closed with collectives still queued"))
		}
		e.loop.close()
	}
	e.closed = true
	e.free()
	return nil
}

// free releases every allocation, windows included.
func (e *Engine) free() {
	for _, r := range e.inflight {
		e.be.Free(r.win)
	}
	for _, b := range e.gradHeld {
		e.be.Free(b)
	}
	for _, b := range e.gradFree {
		e.be.Free(b)
	}
	for _, w := range e.live {
		e.be.Free(w.buf)
	}
	for _, b := range e.allocations {
		e.be.Free(b)
	}
	e.inflight, e.gradHeld, e.gradFree, e.live, e.allocations = nil, nil, nil, nil, nil
	e.liveElems, e.aheadElems = 0, 0
}
