package trainer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// run is one rank's training run.
type run struct {
	be    backend.Backend
	o     Options
	c     comm.Comm
	rank  int
	world int
	// cctx bounds every collective. A signal never cancels it, so the
	// ranks can always finish the step, agree to stop and save; the run's
	// own context is read once per step, into the stop flag.
	cctx context.Context
	lazy bool // run collectives lazily (an estimate on an accounting backend)

	// What the rank holds in backend memory (build).
	paramDType backend.DType // parameters and activations (precision)
	tr         trainee       // what is trained: the whole model, or LoRA adapters
	eng        *zero.Engine  // the trained parameters' engine
	m          *model.Model
	scalars    backend.Buffer    // F32 (4): the loss sum, the stop flag and the target count, all-reduced together (step.go)
	memBufs    [2]backend.Buffer // every rank's memory accounting, gathered for the log

	opt       *optimizer // AdamW, the schedule, fp16's loss scaler (host side)
	startStep int        // 1, or the step after a resumed checkpoint's
	tokens0   int64      // tokens consumed before this process started
	tokens    int64      // tokens consumed so far, tokens0 included

	// Checkpoint lineage and resume state.
	resumedTag string           // the checkpoint resumed from, "" when fresh
	entering   bool             // resumed the previous stage's final checkpoint (RunStages)
	lastSaved  int              // the step whose tag is in this output directory (0: none)
	runID      string           // checkpoint lineage: inherited on resume, new on a fresh start
	fields     []Field          // RunFields, stored in each checkpoint
	lock       *checkpoint.Lock // rank 0's hold on the output directory

	batches BatchSource      // the training micro-batches: loader, or Options.Batches
	loader  *data.Loader     // the shards' loader, whose position checkpoints keep; nil with Options.Batches
	val     *data.EvalLoader // nil without val data
	// inputs and targets hold one training micro-batch (B rows of SeqLen);
	// evalInputs and evalTargets one eval batch (EvalBatchSize rows).
	inputs, targets         []int32
	evalInputs, evalTargets []int32

	logs runLogs // rank 0's

	res        *Result
	start      time.Time // when the first step began
	afterFirst time.Time // when it ended: throughput leaves out the first step
}

// newRun checks the options and builds rank c.Rank()'s run.
func newRun(ctx context.Context, be backend.Backend, o Options) (*run, error) {
	c, o, err := normalize(be, o)
	if err != nil {
		return nil, err
	}
	r := &run{be: be, o: o, c: c, rank: c.Rank(), world: c.Size(), cctx: context.WithoutCancel(ctx),
		logs: runLogs{prog: metrics.Progress{W: o.Log, TotalSteps: o.MaxSteps}}}
	if err := r.setup(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// normalize checks o and fills its defaults; the Comm is o.Comm, or Solo.
func normalize(be backend.Backend, o Options) (comm.Comm, Options, error) {
	if o.Config == nil {
		return nil, o, errors.New("trainer: no config")
	}
	if o.MaxSteps < 1 {
		return nil, o, fmt.Errorf("--max-steps must be at least 1 (got %d)", o.MaxSteps)
	}
	if err := o.Model.CheckSeqLen(o.SeqLen); err != nil {
		return nil, o, fmt.Errorf("--seq-len: %w", err)
	}
	c := o.Comm
	if c == nil {
		c = comm.NewSolo(be)
	}
	if o.Batch.WorldSize != c.Size() {
		return nil, o, fmt.Errorf("the batch sizes were resolved for %d ranks but %d are running", o.Batch.WorldSize, c.Size())
	}
	if err := checkSupported(o.Config); err != nil {
		return nil, o, err
	}
	if err := checkCurriculum(o); err != nil {
		return nil, o, err
	}
	if o.LoRA != nil && o.LoRA.BaseName != "" {
		// Recorded absolute, so that sampling, merging and resuming from
		// another working directory find the base.
		lo := *o.LoRA
		abs, err := filepath.Abs(lo.BaseName)
		if err != nil {
			return nil, o, fmt.Errorf("LoRA base %s: %w", lo.BaseName, err)
		}
		lo.BaseName, o.LoRA = abs, &lo
	}
	if o.EvalBatchSize < 0 {
		return nil, o, fmt.Errorf("the eval batch size must be ≥ 0 (0: the micro-batch size), got %d", o.EvalBatchSize)
	}
	if o.EvalBatchSize == 0 {
		o.EvalBatchSize = o.Batch.MicroBatch
	}
	if o.Log == nil || c.Rank() != 0 {
		o.Log = io.Discard
	}
	if o.PrintEvery <= 0 {
		o.PrintEvery = 10
		if v, ok := o.Config.StepsPerPrint.Get(); ok && v > 0 {
			o.PrintEvery = v
		}
	}
	return c, o, nil
}

// setup prepares a training run: the output directory's lock, the
// weights to start from, what the rank holds (build), the parameters from
// a checkpoint or initial values, the data, and the logs.
func (r *run) setup() error {
	o := r.o
	if o.OutputDir != "" && r.rank == 0 {
		l, err := checkpoint.LockOutputDir(o.OutputDir, func(msg string) { fmt.Fprintln(o.Log, "note: "+msg) })
		if err != nil {
			return err
		}
		r.lock = l
		if err := sweepPartialSaves(o); err != nil {
			return err
		}
		if o.Snapshot != "" {
			if err := model.CopySnapshotFiles(o.Snapshot, o.OutputDir); err != nil {
				return err
			}
		}
	}
	var err error
	if r.fields, err = RunFields(o); err != nil {
		return err
	}
	src, err := r.initFrom()
	if err != nil {
		return err
	}
	if src != nil {
		defer src.Close()
	}
	if err := r.build(); err != nil {
		return err
	}
	ck, err := r.openResume()
	if err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	if ck != nil {
		defer ck.Close()
	} else if err := r.tr.init(src); err != nil {
		return err
	}
	if err := r.openData(); err != nil {
		return err
	}
	r.startStep = 1
	if ck != nil {
		if r.startStep, r.tokens0, err = r.restore(ck, src); err != nil {
			return err
		}
		r.resumedTag = ck.Tag()
	} else {
		r.runID = newRunID()
	}
	r.tokens = r.tokens0
	if r.rank == 0 {
		return r.logs.open(r.o, ck)
	}
	return nil
}

// initFrom opens --init-from's weights for range reads (nil without it)
// and checks they are the model --model asks for.
func (r *run) initFrom() (model.WeightSource, error) {
	if r.o.InitFrom == "" {
		return nil, nil
	}
	cfg := r.o.Model
	w, err := model.OpenInitFrom(r.o.InitFrom, &cfg)
	if err != nil {
		return nil, err
	}
	if c := w.Config(); c != r.o.Model {
		w.Close()
		return nil, fmt.Errorf("--init-from %s holds %v, but --model asks for %v (%s); drop --model or pass the matching one",
			r.o.InitFrom, c, r.o.Model, strings.Join(c.Diff(r.o.Model), ", "))
	}
	return w, nil
}

// InitParamsFrom sets eng's parameters (and fp32 master weights) from src,
// reading only the ranges this rank holds: at stage 3 its chunk of each
// group (plus the small persistent groups whole), below it every group,
// one at a time. So host memory stays O(largest group), and a stage-3 rank
// reads about 1/N of the model from disk. It is RestoreState with fresh
// AdamW moments (zeros, as a new optimizer has them), which reads exactly
// what the rank owns whatever layout wrote the values. Every rank calls it
// after zero.New and before the first step; it issues no collectives.
func InitParamsFrom(eng *zero.Engine, src model.WeightSource) error {
	err := eng.RestoreState(func(kind string, off, n int) ([]float32, error) {
		vals := make([]float32, n)
		if kind != zero.StateParams {
			return vals, nil
		}
		if err := src.ReadRange(vals, off); err != nil {
			return nil, err
		}
		return vals, nil
	})
	if err != nil {
		return fmt.Errorf("--init-from: %w", err)
	}
	return nil
}

// build makes everything the rank holds in backend memory, as every run
// does: the ZeRO engine (parameters, gradients, optimizer state), the model
// and its activations, and the trainer's own buffers; and the optimizer's
// host-side state. Estimate runs exactly this on an accounting backend.
func (r *run) build() error {
	o := r.o
	pdt, gdt, err := precision(o.Config)
	if err != nil {
		return err
	}
	r.paramDType = pdt
	zo := engineOptions(o.Config)
	zo.ParamDType, zo.GradAccumDType, zo.LazyComm = pdt, gdt, r.lazy
	tr, eng, mopts, err := newTrainee(r, model.NewLayout(o.Model), zo)
	if err != nil {
		return err
	}
	r.tr, r.eng = tr, eng
	if o.CheckpointHost {
		mopts.CheckpointPool = backend.HostPinned
	}
	if r.m, err = model.New(r.be, o.Model, mopts); err != nil {
		return err
	}
	if r.scalars, err = r.be.Alloc(backend.Device, backend.Comm, backend.F32, 4); err != nil {
		return err
	}
	n := binary.Size(backend.MemoryStats{}) / 4 // I32 words of one rank's accounting
	if r.memBufs[0], err = r.be.Alloc(backend.Host, backend.Comm, backend.I32, n); err != nil {
		return err
	}
	if r.memBufs[1], err = r.be.Alloc(backend.Host, backend.Comm, backend.I32, n*r.world); err != nil {
		return err
	}
	B, T := o.Batch.MicroBatch, o.SeqLen
	r.inputs, r.targets = make([]int32, B*T), make([]int32, B*T)
	if err := r.m.ReserveActivations(B, T); err != nil {
		return err
	}
	if r.opt, err = newOptimizer(o.Config, r.rank, o.Log); err != nil {
		return err
	}
	r.res = &Result{FirstValLoss: math.NaN(), FinalValLoss: math.NaN()}
	return nil
}

// openData opens the training micro-batches (the shards' loader, unless
// Options.Batches supplies them) and the val loader.
func (r *run) openData() error {
	o := r.o
	B, T, V := o.Batch.MicroBatch, o.SeqLen, o.Model.V
	r.batches = o.Batches
	if r.batches == nil {
		lo := data.LoaderOptions{Shards: o.Data, B: B, T: T, Rank: r.rank, WorldSize: r.world, Shuffle: o.Shuffle, Seed: o.Seed, Vocab: V, Pack: o.Pack}
		var err error
		if r.loader, err = data.NewLoader(lo); err != nil {
			return fmt.Errorf("--data: %w", err)
		}
		r.batches = r.loader
		for _, s := range r.loader.SkippedShards() {
			fmt.Fprintf(o.Log, "warning: shard %s holds fewer than %d tokens (ranks × B·T + 1); skipped\n", s, r.world*B*T+1)
		}
	}
	if len(o.ValData) > 0 {
		E := o.EvalBatchSize
		vo := data.LoaderOptions{Shards: o.ValData, B: E, T: T, Rank: r.rank, WorldSize: r.world, Vocab: V, Pack: o.Pack}
		var err error
		if r.val, err = data.NewEvalLoader(vo, o.EvalBatches); err != nil {
			return fmt.Errorf("--val-data: %w", err)
		}
		r.evalInputs, r.evalTargets = make([]int32, E*T), make([]int32, E*T)
	}
	return nil
}

// engineOptions maps zero_optimization onto the engine.
func engineOptions(c *config.Config) zero.Options {
	z := c.ZeRO
	o := zero.DefaultOptions(z.Stage)
	o.ReduceBucketSize = z.ReduceBucketSize
	o.AllgatherBucketSize = z.AllgatherBucketSize
	o.PrefetchBucketSize = z.Stage3PrefetchBucketSize
	o.MaxLiveParameters = z.Stage3MaxLiveParameters
	o.MaxReuseDistance = z.Stage3MaxReuseDistance
	o.PersistenceThreshold = z.Stage3ParamPersistenceThreshold
	o.OverlapComm = z.OverlapComm
	// Optimizer offload at stage 0, which DeepSpeed ignores, is warned
	// about by config and not passed on; parameter offload below stage 3
	// is a config error.
	if off := z.OffloadOptimizer; off != nil && off.Device == "cpu" && z.Stage >= 1 {
		o.OffloadOptimizer, o.OffloadOptimizerPinned = true, off.PinMemory
	}
	if off := z.OffloadParam; off != nil && off.Device == "cpu" && z.Stage == 3 {
		o.OffloadParam, o.OffloadParamPinned = true, off.PinMemory
	}
	return o
}

// close releases everything the run holds.
func (r *run) close() {
	if r.loader != nil {
		r.loader.Close()
	}
	if r.val != nil {
		r.val.Close()
	}
	r.logs.close()
	for _, b := range []backend.Buffer{r.scalars, r.memBufs[0], r.memBufs[1]} {
		if !b.IsNil() {
			r.be.Free(b)
		}
	}
	if r.m != nil {
		r.m.Free()
	}
	if r.tr != nil {
		for _, e := range r.tr.engines() {
			e.Close()
		}
	}
	r.lock.Release()
}
