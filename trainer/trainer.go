// Package trainer owns the training loop: micro-steps and gradient
// accumulation from the DeepSpeed config, the optimizer step with clipping and
// the scheduler, evaluation, the metrics log and the progress line, and the
// final weights. It knows interfaces only: cmd/gotrain passes in the Backend.
package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/optim"
)

// Options are one training run's settings, already resolved from the config
// file and the flags.
type Options struct {
	Config *config.Config // the DeepSpeed config, "auto" resolved
	Batch  config.Batch   // the resolved batch triangle
	Model  model.Config

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

	OutputDir  string    // metrics.jsonl and model.safetensors go here
	PeakFLOPS  float64   // per-rank peak FLOP/s for MFU; 0: MFU not reported
	Log        io.Writer // progress lines (rank 0); nil: discard
	PrintEvery int       // steps between progress lines; 0: steps_per_print or 10
}

// Result summarises a finished run.
type Result struct {
	Steps           int
	FirstLoss       float64
	FinalLoss       float64
	FirstValLoss    float64 // NaN without val data
	FinalValLoss    float64
	TokensPerSecond float64 // over the run, excluding the first step
	MFU             float64
	WeightsPath     string
}

// Run trains a model from scratch (or from InitFrom) for MaxSteps optimizer
// steps on be.
func Run(ctx context.Context, be backend.Backend, opts Options) (*Result, error) {
	t, err := newRun(be, opts)
	if err != nil {
		return nil, err
	}
	defer t.close()
	return t.loop(ctx)
}

type run struct {
	be   backend.Backend
	o    Options
	m    *model.Model
	opt  optim.AdamWConfig
	sch  optim.Scheduler
	mom  backend.Buffer // AdamW first moment, mirrors the flat parameters
	vel  backend.Buffer // AdamW second moment
	runs []paramRun     // parameter ranges with one weight-decay setting

	train *data.Loader
	val   *data.EvalLoader
	in    []int32
	tg    []int32

	log  *metrics.JSONL
	prog metrics.Progress
}

// paramRun is a contiguous range of the flat parameters that shares one
// weight-decay setting, so AdamW runs once per range instead of per tensor.
type paramRun struct {
	off, n int
	decay  bool
}

func newRun(be backend.Backend, o Options) (*run, error) {
	if o.Config == nil {
		return nil, errors.New("trainer: no config")
	}
	if o.MaxSteps < 1 {
		return nil, fmt.Errorf("--max-steps must be at least 1 (got %d)", o.MaxSteps)
	}
	if o.SeqLen < 1 || o.SeqLen > o.Model.MaxT {
		return nil, fmt.Errorf("--seq-len %d: must be between 1 and the model's n_positions %d", o.SeqLen, o.Model.MaxT)
	}
	if o.Batch.WorldSize != 1 {
		return nil, fmt.Errorf("this trainer runs one process; the config was resolved for world size %d", o.Batch.WorldSize)
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
	r := &run{be: be, o: o, prog: metrics.Progress{W: o.Log, TotalSteps: o.MaxSteps}}
	if err := r.setup(); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *run) setup() error {
	o := r.o
	var host []float32
	cfg := o.Model
	if o.InitFrom != "" {
		c, p, err := model.InitFrom(o.InitFrom, &cfg)
		if err != nil {
			return err
		}
		if c != cfg {
			return fmt.Errorf("--init-from %s holds a model with %+v, but --model asks for %+v; drop --model or pass the matching one", o.InitFrom, c, cfg)
		}
		host = p
	} else {
		host = model.InitParams(cfg, o.Seed)
	}
	mopts := model.Options{Checkpoint: o.Checkpoint}
	if o.CheckpointHost {
		mopts.CheckpointPool = backend.HostPinned
	}
	m, err := model.New(r.be, cfg, mopts)
	if err != nil {
		return err
	}
	r.m = m
	if err := m.SetParams(host); err != nil {
		return err
	}
	n := m.Params().Len()
	if r.mom, err = r.be.Alloc(backend.Device, backend.Optimizer, backend.F32, n); err != nil {
		return fmt.Errorf("allocate AdamW moments: %w", err)
	}
	if r.vel, err = r.be.Alloc(backend.Device, backend.Optimizer, backend.F32, n); err != nil {
		return fmt.Errorf("allocate AdamW moments: %w", err)
	}
	r.runs = decayRuns(m.Layout())

	if r.opt, err = adamWConfig(o.Config.Optimizer); err != nil {
		return err
	}
	if r.sch, err = scheduler(o.Config.Scheduler); err != nil {
		return err
	}

	B, T := o.Batch.MicroBatch, o.SeqLen
	if r.train, err = data.NewLoader(data.LoaderOptions{Shards: o.Data, B: B, T: T, Rank: 0, WorldSize: 1, Shuffle: o.Shuffle, Seed: o.Seed}); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	for _, s := range r.train.SkippedShards() {
		fmt.Fprintf(o.Log, "warning: shard %s holds fewer than B·T+1 = %d tokens; skipped\n", s, B*T+1)
	}
	if len(o.ValData) > 0 {
		if r.val, err = data.NewEvalLoader(data.LoaderOptions{Shards: o.ValData, B: B, T: T, Rank: 0, WorldSize: 1}, o.EvalBatches); err != nil {
			return fmt.Errorf("--val-data: %w", err)
		}
	}
	r.in = make([]int32, B*T)
	r.tg = make([]int32, B*T)
	if err := m.ReserveActivations(B, T); err != nil {
		return err
	}
	if o.OutputDir != "" {
		if err := os.MkdirAll(o.OutputDir, 0o755); err != nil {
			return fmt.Errorf("--output-dir: %w", err)
		}
		if r.log, err = metrics.OpenJSONL(filepath.Join(o.OutputDir, "metrics.jsonl")); err != nil {
			return err
		}
	}
	return nil
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
	for _, b := range []backend.Buffer{r.mom, r.vel} {
		if !b.IsNil() {
			r.be.Free(b)
		}
	}
	if r.m != nil {
		r.m.Free()
	}
}

// decayRuns merges the layout's tensors into maximal contiguous runs with the
// same decay flag (matrices and embeddings decay; biases and norm gains don't).
func decayRuns(lay *model.Layout) []paramRun {
	var out []paramRun
	for _, t := range lay.Tensors() {
		if k := len(out) - 1; k >= 0 && out[k].decay == t.Decay && out[k].off+out[k].n == t.Offset {
			out[k].n += t.Len
			continue
		}
		out = append(out, paramRun{off: t.Offset, n: t.Len, decay: t.Decay})
	}
	return out
}

func (r *run) loop(ctx context.Context) (*Result, error) {
	o := r.o
	B, T, gas := o.Batch.MicroBatch, o.SeqLen, o.Batch.GradAccum
	tokensPerStep := int64(B * T * gas * o.Batch.WorldSize)
	flopsPerToken := o.Model.FlopsPerToken(T)
	res := &Result{FirstValLoss: math.NaN(), FinalValLoss: math.NaN()}
	var afterFirst time.Time
	var tokens int64

	if r.val != nil {
		vl, err := r.evaluate()
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
	for step := 1; step <= o.MaxSteps; step++ {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("stopped at step %d: %w", step, err)
		}
		t0 := time.Now()
		r.m.ZeroGrad()
		var lossSum float64
		// Each micro-batch's loss is a mean over B·T tokens; scaling its gradient
		// by 1/(B·T·gas) makes the accumulated gradient that of the global mean.
		dloss := float32(1.0 / float64(B*T*gas))
		for micro := 0; micro < gas; micro++ {
			if err := r.train.Next(r.in, r.tg); err != nil {
				return res, fmt.Errorf("step %d: read batch: %w", step, err)
			}
			loss, err := r.m.Forward(r.in, r.tg, B, T)
			if err != nil {
				return res, fmt.Errorf("step %d: forward: %w", step, err)
			}
			if err := r.m.Backward(dloss); err != nil {
				return res, fmt.Errorf("step %d: backward: %w", step, err)
			}
			lossSum += float64(loss)
		}
		loss := lossSum / float64(gas)
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return res, fmt.Errorf("step %d: loss is %v; lower the learning rate or enable gradient_clipping", step, loss)
		}

		norm := math.Sqrt(r.be.SumSquares(r.m.Grads()))
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return res, fmt.Errorf("step %d: gradient norm is %v; lower the learning rate or enable gradient_clipping", step, norm)
		}
		coef := optim.ClipCoef(norm, o.Config.GradientClipping)
		lr := r.sch.LR(r.opt.LR)
		cfg := r.opt.Scheduled(r.sch)
		r.adamW(cfg, lr, step, coef)
		r.sch.Step()
		if err := r.be.Sync(); err != nil {
			return res, fmt.Errorf("step %d: %w", step, err)
		}

		dt := time.Since(t0)
		tokens += tokensPerStep
		if step == 1 {
			afterFirst = time.Now()
			res.FirstLoss = loss
		}
		tps := float64(tokensPerStep) / dt.Seconds()
		rec := metrics.StepRecord{
			Step: step, Loss: loss, LR: lr, GradNorm: norm, TokensPerSecond: tps, LossScale: 1,
			Tokens: tokens, StepSeconds: dt.Seconds(), Memory: metrics.MemoryOf(r.be.Memory()),
		}
		if o.PeakFLOPS > 0 {
			rec.MFU = tps * flopsPerToken / o.PeakFLOPS
		}
		if err := r.writeLog(rec); err != nil {
			return res, err
		}
		if step%o.PrintEvery == 0 || step == 1 || step == o.MaxSteps {
			r.prog.Line(rec, time.Since(start), r.be.Memory().PoolTotal(backend.Device))
		}
		res.Steps, res.FinalLoss = step, loss

		if r.val != nil && ((o.EvalEvery > 0 && step%o.EvalEvery == 0) || step == o.MaxSteps) {
			vl, err := r.evaluate()
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
	if o.MaxSteps > 1 {
		res.TokensPerSecond = float64(tokens-tokensPerStep) / time.Since(afterFirst).Seconds()
		if o.PeakFLOPS > 0 {
			res.MFU = res.TokensPerSecond * flopsPerToken / o.PeakFLOPS
		}
	}
	if o.OutputDir != "" {
		path, err := r.saveWeights()
		if err != nil {
			return res, err
		}
		res.WeightsPath = path
	}
	return res, nil
}

// adamW updates every parameter range with the step's hyperparameters.
func (r *run) adamW(cfg optim.AdamWConfig, lr float64, step int, gradScale float64) {
	p, g := r.m.Params(), r.m.Grads()
	for _, pr := range r.runs {
		hp := optim.StepParams(cfg, lr, step, gradScale, pr.decay)
		r.be.AdamW(p.Slice(pr.off, pr.n), backend.Buffer{}, g.Slice(pr.off, pr.n),
			r.mom.Slice(pr.off, pr.n), r.vel.Slice(pr.off, pr.n), hp)
	}
}

// evaluate returns the mean loss over the val loader's batches.
func (r *run) evaluate() (float64, error) {
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
		return 0, fmt.Errorf("eval: the val data holds no batch of B·T+1 = %d tokens", B*T+1)
	}
	return sum / float64(n), nil
}

func (r *run) writeLog(rec any) error {
	if r.log == nil {
		return nil
	}
	return r.log.Write(rec)
}

// saveWeights writes <output-dir>/model.safetensors (Hugging Face GPT-2 names)
// and config.json beside it.
func (r *run) saveWeights() (string, error) {
	host, err := r.m.HostParams()
	if err != nil {
		return "", err
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
