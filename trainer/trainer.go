// Package trainer owns the training loop: micro-steps and gradient
// accumulation from the DeepSpeed config, the ZeRO engine's gradient
// reduction and optimizer step with clipping and the scheduler, evaluation,
// the metrics log and the progress line (rank 0), and the final weights. It
// knows interfaces only: cmd/gotrain passes in the Backend and the Comm.
package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
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
	"github.com/gotrain/gotrain/optim"
	"github.com/gotrain/gotrain/zero"
)

// Options are one training run's settings, already resolved from the config
// file and the flags.
type Options struct {
	Config *config.Config // the DeepSpeed config, "auto" resolved
	Batch  config.Batch   // the resolved batch triangle; Batch.WorldSize must equal the Comm's size
	Model  model.Config
	// Comm connects the data-parallel ranks; nil runs one process
	// (comm.Solo). Every rank calls Run with the same options.
	Comm comm.Comm

	InitFrom string // HF safetensors or llm.c .bin weights; empty: random init
	Seed     uint64

	Data        []string // train shards (paths or globs)
	ValData     []string // val shards; empty: no eval
	SeqLen      int      // T
	MaxSteps    int      // optimizer steps
	EvalEvery   int      // steps between evals; 0: only at the end
	EvalBatches int      // micro-batches per eval; 0: 20
	Shuffle     bool     // permute shard and batch order every epoch (seeded by Seed); default llm.c's order
	// Checkpoint recomputes each block in backward from its kept input
	// (activation_checkpointing in the config, or --gradient-checkpointing);
	// CheckpointHost keeps those inputs in host memory (cpu_checkpointing).
	Checkpoint, CheckpointHost bool

	OutputDir string    // metrics.jsonl and model.safetensors go here (rank 0 writes)
	PeakFLOPS float64   // per-rank peak FLOP/s for MFU; 0: MFU not reported
	Log       io.Writer // progress lines (rank 0 only); nil: discard
	// Observer, when set, receives every optimizer step on this rank (the
	// Prometheus endpoint).
	Observer   Observer
	PrintEvery int // steps between progress lines; 0: steps_per_print or 10

	// Checkpoints under <OutputDir>/checkpoints: every SaveEvery steps (0:
	// only at the end and when stopped by a signal), keeping the newest
	// SaveTotalLimit tags of this run's lineage (0: all). Resume is "" or
	// "never" (start afresh; an output directory that holds checkpoints is
	// refused unless Overwrite moves them aside), "auto" (continue from
	// latest, or the newest tag that verifies; start afresh if there is
	// none), or a checkpoints directory or tag directory. A resume whose
	// settings differ from the checkpoint's in a way that changes the math
	// is refused unless AllowConfigChange.
	SaveEvery, SaveTotalLimit int
	Resume                    string
	Overwrite                 bool
	AllowConfigChange         bool
	ConfigText                string // the config file as read, stored in checkpoints

	// Version is gotrain's version, one of the RunFields every rank and a
	// resumed checkpoint compare.
	Version string
}

// Observer receives each optimizer step with this rank's memory accounting
// and cumulative communication counters.
type Observer interface {
	ObserveStep(rec metrics.StepRecord, local backend.MemoryStats, comm metrics.CommCounters)
}

// Result summarises a finished run.
type Result struct {
	Steps           int
	FirstLoss       float64
	FinalLoss       float64
	SkippedSteps    int     // fp16 overflow steps (no update)
	FirstValLoss    float64 // NaN without val data
	FinalValLoss    float64
	TokensPerSecond float64 // all ranks together, over the run excluding the first step
	MFU             float64 // per rank
	WeightsPath     string
	// StartStep is the first step this process ran: 1, or the step after
	// the checkpoint in ResumedFrom. StartStep > MaxSteps means the
	// checkpoint was already at the end and nothing was trained.
	StartStep   int
	ResumedFrom string
}

// StoppedError is Run's error when a signal (the context's cancellation)
// stopped every rank at a step boundary. The steps done by then are saved
// unless there was no output directory.
type StoppedError struct {
	Step       int    // the last step completed; 0 when none was
	Checkpoint string // the tag holding Step ("" when nothing is saved)
	Cause      error  // context.Cause of the run's context, e.g. the signal
}

func (e *StoppedError) Error() string {
	switch {
	case e.Checkpoint != "":
		return fmt.Sprintf("stopped (%v) after saving checkpoint %s", e.Cause, e.Checkpoint)
	case e.Step > 0:
		return fmt.Sprintf("stopped (%v) after step %d; nothing saved (no --output-dir)", e.Cause, e.Step)
	}
	return fmt.Sprintf("stopped (%v) before the first step", e.Cause)
}

// Unwrap is the cause, so errors.Is(err, context.Canceled) holds.
func (e *StoppedError) Unwrap() error { return e.Cause }

// Run trains a model from scratch (or from InitFrom) for MaxSteps optimizer
// steps on be.
func Run(ctx context.Context, be backend.Backend, opts Options) (*Result, error) {
	t, err := newRun(ctx, be, opts)
	if err != nil {
		return nil, err
	}
	defer t.close()
	if t.rank == 0 && t.o.Log != io.Discard {
		// What this rank holds after start-up, next to what gotrain
		// estimate predicts for the same run.
		est, err := Estimate(t.o.Config, t.o.Model, t.world, t.o.SeqLen, EstimateOptions{Checkpoint: t.o.Checkpoint})
		if err == nil {
			err = FormatMeasured(t.o.Log, be.Memory(), est)
		}
		if err != nil {
			return nil, fmt.Errorf("memory table: %w", err)
		}
	}
	return t.loop(ctx)
}

type run struct {
	be        backend.Backend
	o         Options
	c         comm.Comm
	rank      int
	world     int
	eng       *zero.Engine
	m         *model.Model
	opt       optim.AdamWConfig
	sch       optim.Scheduler
	scaler    *optim.LossScaler // fp16 only
	updates   int               // successful optimizer updates (AdamW's bias-correction step)
	skipped   int               // steps skipped on fp16 overflow
	startStep int               // 1, or the step after a resumed checkpoint's
	tokens0   int64             // tokens consumed before this process started
	scalar    backend.Buffer    // F32 (1): a value averaged over ranks
	memBufs   [2]backend.Buffer

	// Checkpoint lineage and resume state.
	resumedTag string           // the checkpoint resumed from, "" when fresh
	lastSaved  int              // the step whose tag is in this output directory (0: none)
	runID      string           // checkpoint lineage: inherited on resume, new on a fresh start
	fields     []Field          // RunFields, stored in each checkpoint
	lock       *checkpoint.Lock // rank 0's hold on the output directory

	train *data.Loader
	val   *data.EvalLoader
	in    []int32
	tg    []int32

	log       *metrics.JSONL
	monitors  metrics.Monitors // DeepSpeed's csv_monitor and tensorboard (rank 0)
	prog      metrics.Progress
	breakdown metrics.Breakdown
}

func newRun(ctx context.Context, be backend.Backend, o Options) (*run, error) {
	if o.Config == nil {
		return nil, errors.New("trainer: no config")
	}
	if o.MaxSteps < 1 {
		return nil, fmt.Errorf("--max-steps must be at least 1 (got %d)", o.MaxSteps)
	}
	if o.SeqLen < 1 || o.SeqLen > o.Model.MaxT {
		return nil, fmt.Errorf("--seq-len %d: must be between 1 and the model's n_positions %d", o.SeqLen, o.Model.MaxT)
	}
	c := o.Comm
	if c == nil {
		c = comm.NewSolo(be)
	}
	if o.Batch.WorldSize != c.Size() {
		return nil, fmt.Errorf("the batch sizes were resolved for %d ranks but %d are running", o.Batch.WorldSize, c.Size())
	}
	if err := checkSupported(o.Config); err != nil {
		return nil, err
	}
	if o.EvalBatches <= 0 {
		o.EvalBatches = 20
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.PrintEvery <= 0 {
		o.PrintEvery = 10
		if v, ok := o.Config.StepsPerPrint.Get(); ok && v > 0 {
			o.PrintEvery = v
		}
	}
	if c.Rank() != 0 {
		o.Log = io.Discard
	}
	r := &run{be: be, o: o, c: c, rank: c.Rank(), world: c.Size(), prog: metrics.Progress{W: o.Log, TotalSteps: o.MaxSteps}}
	if err := r.setup(ctx); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *run) setup(ctx context.Context) error {
	o := r.o
	if o.OutputDir != "" && r.rank == 0 {
		l, err := checkpoint.LockOutputDir(o.OutputDir, func(msg string) { fmt.Fprintln(o.Log, "note: "+msg) })
		if err != nil {
			return err
		}
		r.lock = l
	}
	var err error
	if r.fields, err = RunFields(o); err != nil {
		return err
	}
	cfg := o.Model
	var host []float32 // --init-from weights; nil: random init, one group at a time
	if o.InitFrom != "" {
		c, p, err := model.InitFrom(o.InitFrom, &cfg)
		if err != nil {
			return err
		}
		if c != cfg {
			return fmt.Errorf("--init-from %s holds a model with %+v, but --model asks for %+v; drop --model or pass the matching one", o.InitFrom, c, cfg)
		}
		host = p
	}
	lay := model.NewLayout(cfg)
	pdt, gdt, err := precision(o.Config)
	if err != nil {
		return err
	}
	zo := engineOptions(o.Config)
	zo.ParamDType, zo.GradAccumDType = pdt, gdt
	// A signal stops the loop at a step boundary, after a checkpoint; it
	// must not abort the collectives that checkpoint needs.
	eng, err := zero.New(context.WithoutCancel(ctx), r.be, r.c, engineGroups(lay), zo)
	if err != nil {
		return err
	}
	r.eng = eng
	ck, err := r.openResume()
	if err != nil {
		return fmt.Errorf("--resume: %w", err)
	}
	if ck != nil {
		defer ck.Close()
	} else {
		err = eng.InitParams(func(g int) ([]float32, error) {
			if host != nil {
				off, n := lay.GroupRange(g)
				return host[off : off+n], nil
			}
			return model.InitGroup(lay, o.Seed, g), nil
		})
		if err != nil {
			return err
		}
	}
	host = nil
	mopts := model.Options{Store: eng, Checkpoint: o.Checkpoint, ParamDType: pdt, ActDType: pdt}
	if o.CheckpointHost {
		mopts.CheckpointPool = backend.HostPinned
	}
	if r.m, err = model.New(r.be, cfg, mopts); err != nil {
		return err
	}
	if r.scalar, err = r.be.Alloc(backend.Device, backend.Comm, backend.F32, 1); err != nil {
		return err
	}
	n := len(backend.Pools()) * (len(backend.Categories()) + 1) * 2
	if r.memBufs[0], err = r.be.Alloc(backend.Host, backend.Comm, backend.I32, n); err != nil {
		return err
	}
	if r.memBufs[1], err = r.be.Alloc(backend.Host, backend.Comm, backend.I32, n*r.world); err != nil {
		return err
	}

	if r.opt, err = adamWConfig(o.Config.Optimizer); err != nil {
		return err
	}
	if r.sch, err = scheduler(o.Config.Scheduler); err != nil {
		return err
	}
	if r.scaler, err = lossScaler(o.Config, r.rank, func(msg string) { fmt.Fprintln(o.Log, msg) }); err != nil {
		return err
	}

	B, T := o.Batch.MicroBatch, o.SeqLen
	lo := data.LoaderOptions{Shards: o.Data, B: B, T: T, Rank: r.rank, WorldSize: r.world, Shuffle: o.Shuffle, Seed: o.Seed, Vocab: cfg.V}
	if r.train, err = data.NewLoader(lo); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	for _, s := range r.train.SkippedShards() {
		fmt.Fprintf(o.Log, "warning: shard %s holds fewer than %d tokens (ranks × B·T + 1); skipped\n", s, r.world*B*T+1)
	}
	if len(o.ValData) > 0 {
		vo := data.LoaderOptions{Shards: o.ValData, B: B, T: T, Rank: r.rank, WorldSize: r.world, Vocab: cfg.V}
		if r.val, err = data.NewEvalLoader(vo, o.EvalBatches); err != nil {
			return fmt.Errorf("--val-data: %w", err)
		}
	}
	r.in = make([]int32, B*T)
	r.tg = make([]int32, B*T)
	if err := r.m.ReserveActivations(B, T); err != nil {
		return err
	}
	r.startStep = 1
	if ck != nil {
		if r.startStep, r.tokens0, err = r.restore(ck); err != nil {
			return err
		}
		r.resumedTag = ck.Tag()
	} else {
		r.runID = newRunID()
	}
	if r.rank == 0 {
		return r.openLogs(ck)
	}
	return nil
}

// openLogs opens metrics.jsonl and the config's monitors on rank 0, once
// the start step is settled: a resume drops the records beyond its
// checkpoint (the run computes those steps again); a fresh start moves an
// earlier run's logs aside. See metrics/logfiles.go.
func (r *run) openLogs(ck *checkpoint.Reader) error {
	o := r.o
	if err := r.openMonitors(); err != nil {
		return err
	}
	if ck != nil {
		if err := r.monitors.ResumeAt(ck.Meta().Samples); err != nil {
			return err
		}
	} else {
		moved, err := r.monitors.SetAside(time.Now())
		if err != nil {
			return err
		}
		for _, m := range moved {
			fmt.Fprintf(o.Log, "moved an earlier run's monitor file to %s\n", m)
		}
	}
	if o.OutputDir == "" {
		return nil
	}
	if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
		return fmt.Errorf("--output-dir: %w", err)
	}
	path := filepath.Join(o.OutputDir, "metrics.jsonl")
	if ck != nil {
		n, err := metrics.TrimLog(path, int(ck.Meta().Step))
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(o.Log, "dropped %d record(s) beyond step %d from %s: this run computes those steps again\n", n, ck.Meta().Step, path)
		}
	} else {
		moved, ok, err := metrics.SetAside(path, time.Now())
		if err != nil {
			return err
		}
		if ok {
			fmt.Fprintf(o.Log, "moved an earlier run's %s to %s\n", filepath.Base(path), moved)
		}
	}
	var err error
	r.log, err = metrics.OpenJSONL(path)
	return err
}

// openMonitors starts the config's monitor blocks on rank 0: csv_monitor and
// tensorboard write files (under output_path, else --output-dir); wandb and
// comet need a network gotrain never uses.
func (r *run) openMonitors() error {
	c := r.o.Config
	dir := func(p string) string {
		if p == "" {
			return r.o.OutputDir
		}
		return p
	}
	if c.CSVMonitor.Enabled {
		m, err := metrics.NewCSVMonitor(dir(c.CSVMonitor.OutputPath), c.CSVMonitor.JobName)
		if err != nil {
			return fmt.Errorf("csv_monitor: %w", err)
		}
		r.monitors = append(r.monitors, m)
	}
	if c.TensorBoard.Enabled {
		m, err := metrics.NewTensorBoard(dir(c.TensorBoard.OutputPath), c.TensorBoard.JobName)
		if err != nil {
			return fmt.Errorf("tensorboard: %w", err)
		}
		r.monitors = append(r.monitors, m)
	}
	if c.WandB.Enabled {
		fmt.Fprintln(r.o.Log, metrics.UnsupportedMonitorWarning("wandb"))
	}
	if c.Comet.Enabled {
		fmt.Fprintln(r.o.Log, metrics.UnsupportedMonitorWarning("comet"))
	}
	return nil
}

// engineGroups describes the model's parameter groups to the ZeRO engine.
func engineGroups(lay *model.Layout) []zero.Group {
	gs := make([]zero.Group, lay.NumGroups())
	for g := range gs {
		off, n := lay.GroupRange(g)
		gs[g] = zero.Group{Off: off, Len: n}
		for _, t := range lay.GroupTensors(g) {
			gs[g].Tensors = append(gs[g].Tensors, zero.Tensor{Off: t.Offset, Len: t.Len, Decay: t.Decay})
		}
	}
	return gs
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
	// Offload settings DeepSpeed ignores (optimizer offload at stage 0,
	// parameter offload below stage 3) are warned about by config and not
	// passed on.
	if off := z.OffloadOptimizer; off != nil && off.Device == "cpu" && z.Stage >= 1 {
		o.OffloadOptimizer, o.OffloadOptimizerPinned = true, off.PinMemory
	}
	if off := z.OffloadParam; off != nil && off.Device == "cpu" && z.Stage == 3 {
		o.OffloadParam, o.OffloadParamPinned = true, off.PinMemory
	}
	return o
}

func (r *run) close() {
	if r.train != nil {
		r.train.Close()
	}
	if r.val != nil {
		r.val.Close()
	}
	if r.log != nil {
		r.log.Close()
	}
	if len(r.monitors) > 0 {
		r.monitors.Close()
	}
	for _, b := range []backend.Buffer{r.scalar, r.memBufs[0], r.memBufs[1]} {
		if !b.IsNil() {
			r.be.Free(b)
		}
	}
	if r.m != nil {
		r.m.Free()
	}
	if r.eng != nil {
		r.eng.Close()
	}
	r.lock.Release()
}

func (r *run) loop(ctx context.Context) (*Result, error) {
	runCtx := ctx
	o := r.o
	B, T, gas := o.Batch.MicroBatch, o.SeqLen, o.Batch.GradAccum
	tokensPerStep := int64(B * T * gas * r.world)
	flopsPerToken := o.Model.FlopsPerToken(T)
	res := &Result{FirstValLoss: math.NaN(), FinalValLoss: math.NaN(), StartStep: r.startStep, ResumedFrom: r.resumedTag}
	var afterFirst time.Time
	tokens := r.tokens0
	bg := context.WithoutCancel(ctx) // collectives finish even after a signal

	if r.val != nil && r.startStep == 1 {
		vl, err := r.evaluate(bg)
		if err != nil {
			return nil, err
		}
		res.FirstValLoss, res.FinalValLoss = vl, vl
		fmt.Fprintf(o.Log, "step %d | val loss %.4f\n", 0, vl)
		if err := r.writeLog(metrics.EvalRecord{Step: 0, ValLoss: vl, Batches: o.EvalBatches}); err != nil {
			return nil, err
		}
	}

	start := time.Now()
	ctx = bg
	for step := r.startStep; step <= o.MaxSteps; step++ {
		stop, err := r.stopRequested(runCtx)
		if err != nil {
			return res, err
		}
		if stop {
			// A signal (SIGTERM from a scheduler's preemption, Ctrl-C):
			// every rank agreed to stop here; keep the work done so far,
			// unless the step's tag was just saved (saving it again would
			// only replace a good tag).
			last, tag := step-1, ""
			if o.OutputDir != "" && last > 0 {
				if last != r.lastSaved {
					if err := r.save(ctx, last, tokens); err != nil {
						return res, err
					}
				}
				tag = checkpoint.TagName(int64(last))
			}
			return res, &StoppedError{Step: last, Checkpoint: tag, Cause: context.Cause(runCtx)}
		}
		t0 := time.Now()
		if err := r.eng.ZeroGrad(); err != nil {
			return res, fmt.Errorf("step %d: %w", step, err)
		}
		var lossSum float64
		// Each micro-batch's loss is a mean over B·T tokens; scaling its
		// gradient by 1/(B·T·gas·world) makes the gradient summed over the
		// micro-batches and reduced (summed) over ranks that of the global mean.
		// fp16 multiplies it by the loss scale, which the step divides out.
		lossScale := 1.0
		if r.scaler != nil {
			lossScale = r.scaler.Scale()
		}
		dloss := float32(lossScale / float64(B*T*gas*r.world))
		var fwd, bwd time.Duration
		commBefore := commSeconds(r.c.Stats())
		for micro := 0; micro < gas; micro++ {
			if err := r.train.Next(r.in, r.tg); err != nil {
				return res, fmt.Errorf("step %d: read batch: %w", step, err)
			}
			t := time.Now()
			loss, err := r.m.Forward(r.in, r.tg, B, T)
			if err != nil {
				return res, fmt.Errorf("step %d: forward: %w", step, err)
			}
			fwd += time.Since(t)
			t = time.Now()
			if err := r.m.Backward(dloss); err != nil {
				return res, fmt.Errorf("step %d: backward: %w", step, err)
			}
			bwd += time.Since(t)
			lossSum += float64(loss)
		}
		loss, err := r.average(ctx, lossSum/float64(gas))
		if err != nil {
			return res, fmt.Errorf("step %d: %w", step, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("step %d: loss is %v; lower the learning rate or enable gradient_clipping", step, loss)
		}

		tOpt := time.Now()
		lr := r.sch.LR(r.opt.LR)
		cfg := r.opt.Scheduled(r.sch)
		upd := r.updates + 1
		norm, err := r.eng.Step(ctx, zero.StepInput{LR: lr, Step: upd, ClipNorm: o.Config.GradientClipping, LossScale: lossScale,
			Hyper: func(decay bool) backend.AdamWParams { return optim.StepParams(cfg, lr, upd, 1, decay) }})
		overflow := errors.Is(err, zero.ErrNonFiniteGradients)
		if overflow && r.scaler == nil {
			return res, fmt.Errorf("step %d: %s; lower the learning rate or enable gradient_clipping", step, r.nonFinite(err, norm))
		}
		if err != nil && !overflow {
			return res, fmt.Errorf("step %d: %w", step, err)
		}
		if r.scaler != nil {
			// DeepSpeed's dynamic loss scaler: every rank saw the same
			// reduced gradients, so every rank agrees on the overflow.
			skipped, serr := r.scaler.Update(overflow)
			if serr != nil {
				return res, fmt.Errorf("step %d: %w", step, serr)
			}
			if skipped {
				r.skipped++
			}
		}
		if !overflow {
			r.updates++
			r.sch.Step() // not stepped on fp16 overflow steps, as DeepSpeed
		}
		optDur := time.Since(tOpt)
		if err := r.be.Sync(); err != nil {
			return res, fmt.Errorf("step %d: %w", step, err)
		}

		dt := time.Since(t0)
		tokens += tokensPerStep
		if step == r.startStep {
			afterFirst = time.Now()
			res.FirstLoss = loss
		}
		tps := float64(tokensPerStep) / dt.Seconds()
		mem, err := r.memory(ctx)
		if err != nil {
			return res, fmt.Errorf("step %d: %w", step, err)
		}
		rec := metrics.StepRecord{
			Step: step, Loss: loss, LR: lr, GradNorm: norm, TokensPerSecond: tps, LossScale: lossScale,
			Tokens: tokens, StepSeconds: dt.Seconds(), Memory: mem, Skipped: overflow, SkippedSteps: r.skipped,
			ForwardSeconds: fwd.Seconds(), BackwardSeconds: bwd.Seconds(), OptimizerSeconds: optDur.Seconds(),
			CommSeconds: commSeconds(r.c.Stats()) - commBefore,
		}
		rec.MFU = metrics.MFU(tps/float64(r.world), flopsPerToken, o.PeakFLOPS)
		if err := r.writeLog(rec); err != nil {
			return res, err
		}
		if o.Observer != nil {
			o.Observer.ObserveStep(rec, r.be.Memory(), commCounters(r.c.Stats()))
		}
		if len(r.monitors) > 0 {
			// DeepSpeed's monitors put samples, not steps, on the x-axis.
			samples := int64(step) * int64(o.Batch.TrainBatchSize)
			if err := r.monitors.Write(metrics.StepEvents(rec, samples, r.scaler != nil)); err != nil {
				return res, fmt.Errorf("step %d: monitor: %w", step, err)
			}
		}
		r.breakdown.Add(rec.ForwardSeconds, rec.BackwardSeconds, rec.CommSeconds, rec.OptimizerSeconds)
		if step%o.PrintEvery == 0 || step == 1 || step == o.MaxSteps {
			r.prog.Line(rec, time.Since(start), r.be.Memory().PoolTotal(backend.Device))
			if o.Config.WallClockBreakdown {
				fmt.Fprintln(o.Log, r.breakdown.Line())
				r.breakdown.Reset()
			}
		}
		res.Steps, res.FinalLoss, res.SkippedSteps = step, loss, r.skipped
		if step == o.MaxSteps || (o.SaveEvery > 0 && step%o.SaveEvery == 0) {
			if err := r.save(ctx, step, tokens); err != nil {
				return res, err
			}
		}

		if r.val != nil && ((o.EvalEvery > 0 && step%o.EvalEvery == 0) || step == o.MaxSteps) {
			vl, err := r.evaluate(ctx)
			if err != nil {
				return res, err
			}
			res.FinalValLoss = vl
			fmt.Fprintf(o.Log, "step %d | val loss %.4f\n", step, vl)
			if err := r.writeLog(metrics.EvalRecord{Step: step, ValLoss: vl, Batches: o.EvalBatches}); err != nil {
				return res, err
			}
		}
	}
	if o.MaxSteps > r.startStep {
		res.TokensPerSecond = float64(tokens-r.tokens0-tokensPerStep) / time.Since(afterFirst).Seconds()
		res.MFU = metrics.MFU(res.TokensPerSecond/float64(r.world), flopsPerToken, o.PeakFLOPS)
	}
	if o.OutputDir != "" {
		path, err := r.saveWeights(ctx)
		if err != nil {
			return res, err
		}
		res.WeightsPath = path
	}
	return res, nil
}

// evaluate returns the mean loss over the val loader's batches, averaged
// over ranks (each reads its own chunks of the val split).
func (r *run) evaluate(ctx context.Context) (float64, error) {
	r.val.Reset()
	B, T := r.o.Batch.MicroBatch, r.o.SeqLen
	var sum float64
	n := 0
	for {
		err := r.val.Next(r.in, r.tg)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("eval: %w", err)
		}
		loss, err := r.m.Forward(r.in, r.tg, B, T)
		if err != nil {
			return 0, fmt.Errorf("eval: %w", err)
		}
		sum += float64(loss)
		n++
	}
	if n == 0 {
		return 0, fmt.Errorf("eval: the val data holds no batch of ranks × B·T + 1 = %d tokens", r.world*B*T+1)
	}
	return r.average(ctx, sum/float64(n))
}

// average returns x averaged over the ranks (x itself with one rank).
func (r *run) average(ctx context.Context, x float64) (float64, error) {
	if r.world == 1 {
		return x, nil
	}
	if err := backend.WriteF32(r.be, r.scalar, []float32{float32(x)}); err != nil {
		return 0, err
	}
	err := r.eng.Collective(ctx, "average", func(ctx context.Context, c comm.Comm) error {
		return c.AllReduce(ctx, r.scalar, comm.Avg)
	})
	if err != nil {
		return 0, err
	}
	v, err := backend.ReadF32(r.be, r.scalar)
	if err != nil {
		return 0, err
	}
	return float64(v[0]), nil
}

func (r *run) writeLog(rec any) error {
	if r.log == nil {
		return nil
	}
	return r.log.Write(rec)
}

// saveWeights writes <output-dir>/model.safetensors (Hugging Face GPT-2 names)
// and config.json beside it. Every rank takes part in gathering the
// parameters; rank 0 writes.
func (r *run) saveWeights(ctx context.Context) (string, error) {
	host, err := r.eng.HostParams(ctx)
	if err != nil {
		return "", err
	}
	if r.rank != 0 {
		return "", nil
	}
	path := filepath.Join(r.o.OutputDir, "model.safetensors")
	if err := model.SaveHF(path, r.o.Model, host, backend.F32); err != nil {
		return "", err
	}
	if err := model.WriteHFConfig(filepath.Join(r.o.OutputDir, "config.json"), r.o.Model); err != nil {
		return "", err
	}
	return path, nil
}

// memory gathers every rank's memory accounting for metrics.jsonl: each
// byte count travels as two int32 halves (31 bits each) through one
// all-gather, so sizes beyond 2 GiB stay exact.
func (r *run) memory(ctx context.Context) (metrics.RankMemory, error) {
	local := r.be.Memory()
	if r.world == 1 {
		return metrics.RankMemory{metrics.MemoryOf(local)}, nil
	}
	var vals []int64
	for _, p := range backend.Pools() {
		for _, c := range backend.Categories() {
			vals = append(vals, local.Current[p][c])
		}
		vals = append(vals, local.Peak[p])
	}
	enc := make([]int32, 0, 2*len(vals))
	for _, v := range vals {
		enc = append(enc, int32(v>>31), int32(v&(1<<31-1)))
	}
	if err := backend.WriteI32(r.be, r.memBufs[0], enc); err != nil {
		return nil, err
	}
	err := r.eng.Collective(ctx, "memory report", func(ctx context.Context, c comm.Comm) error {
		return c.AllGather(ctx, r.memBufs[1], r.memBufs[0])
	})
	if err != nil {
		return nil, err
	}
	all, err := backend.ReadI32(r.be, r.memBufs[1])
	if err != nil {
		return nil, err
	}
	out := make(metrics.RankMemory, r.world)
	for rank := range out {
		var s backend.MemoryStats
		k := rank * len(enc)
		for _, p := range backend.Pools() {
			for _, c := range backend.Categories() {
				s.Current[p][c] = int64(all[k])<<31 | int64(all[k+1])
				k += 2
			}
			s.Peak[p] = int64(all[k])<<31 | int64(all[k+1])
			k += 2
		}
		out[rank] = metrics.MemoryOf(s)
	}
	return out, nil
}

// nonFinite names the tensors whose gradient is NaN or Inf (in the part this
// rank reduced), for the error that stops a bf16 or fp32 run.
func (r *run) nonFinite(err error, norm float64) string {
	var nf *zero.NonFiniteError
	if !errors.As(err, &nf) || len(nf.Tensors) == 0 {
		return fmt.Sprintf("the gradient norm is %v (NaN or Inf in another rank's part of the gradient)", norm)
	}
	lay := r.m.Layout()
	var names []string
	for _, t := range nf.Tensors {
		names = append(names, lay.GroupTensors(t.Group)[t.Tensor].Name)
	}
	return fmt.Sprintf("the gradient of %s holds NaN or Inf (norm %v)", strings.Join(names, ", "), norm)
}

// commSeconds is the time spent in collectives so far, over every kind.
func commSeconds(s comm.Stats) float64 {
	var t float64
	for _, k := range comm.Kinds() {
		t += s.Of(k).Seconds
	}
	return t
}

// commCounters converts the Comm's statistics for the metrics endpoint.
func commCounters(s comm.Stats) metrics.CommCounters {
	cc := metrics.CommCounters{}
	for _, k := range comm.Kinds() {
		o := s.Of(k)
		cc[k.Label()] = metrics.CommOp{Bytes: o.Bytes, Seconds: o.Seconds}
	}
	return cc
}

// stopRequested reports whether any rank has been signalled to stop, agreed
// by every rank (a one-element all-reduce of the flag), so all ranks stop at
// the same step boundary.
func (r *run) stopRequested(ctx context.Context) (bool, error) {
	local := float64(0)
	if ctx.Err() != nil {
		local = 1
	}
	if r.world == 1 {
		return local == 1, nil
	}
	if err := backend.WriteF32(r.be, r.scalar, []float32{float32(local)}); err != nil {
		return false, err
	}
	err := r.eng.Collective(context.WithoutCancel(ctx), "stop flag", func(ctx context.Context, c comm.Comm) error {
		return c.AllReduce(ctx, r.scalar, comm.Max)
	})
	if err != nil {
		return false, err
	}
	v, err := backend.ReadF32(r.be, r.scalar)
	if err != nil {
		return false, err
	}
	return v[0] != 0, nil
}
