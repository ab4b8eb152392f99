package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/backend/meta"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/costmodel"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "time training steps of a model on one device: tokens/s and MFU",
		Description: "Runs forward, backward and an AdamW step on random tokens (no data needed) with one device,\n" +
			"after one untimed warm-up step. MFU is 6 × matmul weights + attention FLOPs per token over the device's peak: the\n" +
			"bf16 tensor-core peak of known GPUs, or --peak-flops. On the CPU the peak is the roofline of the GEMM the run used\n" +
			"(--blas), measured after the steps on the largest GEMM shapes the step ran and a 1024³ product: the best rate that\n" +
			"GEMM reaches, so MFU stays at or below 100%.\n\n" +
			"With --dry-run nothing runs on a device: the trainer's real step runs on the accounting backend, and a\n" +
			"cost model prices every kernel and GEMM the CUDA backend would launch at the published peaks of\n" +
			"--gpu (roofline: the larger of FLOPs over peak and bytes over bandwidth). It prints a per-op table,\n" +
			"the step time and MFU. These are a cost model's upper bounds, never a measurement.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "device", Value: "auto", Usage: "cpu, cuda or auto"},
			&cli.BoolFlag{Name: "allow-tf32", Usage: "let fp32 GEMMs on the GPU run on TF32 tensor cores (PyTorch's allow_tf32; off: true fp32, as the CPU)"},
			&cli.StringFlag{Name: "model", Value: "gpt2", Usage: "preset (gpt2-tiny … qwen3-14b: no weights needed), a Hugging Face snapshot `DIR` or config.json; random weights"},
			&cli.IntFlag{Name: "batch", Value: 4, Usage: "micro-batch size B"},
			&cli.IntFlag{Name: "seq-len", Value: 1024, Usage: "sequence length T"},
			&cli.IntFlag{Name: "steps", Value: 10, Usage: "timed steps"},
			&cli.StringFlag{Name: "dtype", Value: "auto", Usage: "parameter and activation storage: fp32, bf16 or auto (fp32 master and moments either way); auto is bf16 on a GPU and on a CPU where the backend's bf16 GEMM is faster than fp32, else fp32"},
			&cli.StringFlag{Name: "blas", Value: "auto", Usage: "CPU GEMM: go (gotrain's own), openblas, or auto ($" + blas.EnvBLAS + ", else the faster of the two on this run's shapes, measured once per machine)"},
			&cli.BoolFlag{Name: "gradient-checkpointing", Usage: "recompute activations in backward"},
			&cli.IntFlag{Name: "threads", Usage: "CPU threads (0: all cores)"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the steps (warm-up included) to `FILE`, for go tool pprof"},
			&cli.Float64Flag{Name: "peak-flops", Usage: "the device's peak FLOP/s for MFU (0: known GPU table or measured CPU roofline)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "run nothing on a device: price the CUDA backend's step with the cost model (an upper bound, not a measurement)"},
			&cli.StringFlag{Name: "gpu", Value: "h100", Usage: "with --dry-run, the GPU whose published peaks the cost model uses: " + strings.Join(gpuKeys(), ", ")},
		},
		Action: runBench,
	}
}

func runBench(c *cli.Context) error {
	if c.Bool("dry-run") {
		return runBenchDry(c)
	}
	w := c.App.Writer
	device, note, err := resolveDevice(c.String("device"), 1)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintf(c.App.ErrWriter, "info: --device auto chose the CPU: %s\n", note)
	}
	cfg, B, T, dt, err := benchShape(c, device)
	if err != nil {
		return err
	}
	steps := c.Int("steps")
	threads := c.Int("threads")
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	peak := c.Float64("peak-flops")
	var be backend.Backend
	var what string
	if device == "cuda" {
		gpu, err := openGPU(0, threads, c.Bool("allow-tf32"))
		if err != nil {
			return err
		}
		defer gpu.Close()
		be = gpu.be
		gi := gpu.dev.Info()
		what = fmt.Sprintf("%s (sm_%d)", gi.Name, gi.SM())
		if g, ok := costmodel.DeviceGPU(gi.Name); ok && peak == 0 {
			peak = g.BF16
		}
	}
	var rec *blas.Recorder
	var gemm cpuGEMM
	if device != "cuda" {
		if gemm, err = chooseCPUGEMM(c.String("blas"), threads, gemmShapes(cfg, B, T)); err != nil {
			return err
		}
		impl := gemm.impl
		rec = blas.NewRecorder(impl)
		be = cpu.New(cpu.Options{Gemm: rec, Threads: threads})
		what = fmt.Sprintf("CPU, %d threads, BLAS %s", threads, gemm.describe())
		if c.String("dtype") == "auto" && cpu.FastBF16(impl) {
			dt = backend.BF16
		}
		if dt == backend.BF16 && !cpu.FastBF16(impl) {
			fmt.Fprintf(c.App.ErrWriter, "info: --dtype bf16 on this CPU is slower than fp32: %s\n", cpu.BF16Note(impl))
		}
	}

	stopProfile, err := startCPUProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	res, err := benchSteps(be, cfg, B, T, steps, dt, c.Bool("gradient-checkpointing"))
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if rec != nil && peak == 0 {
		peak, what = benchRoofline(gemm, rec, what)
	}
	flops := cfg.FlopsPerToken(T)
	fmt.Fprintf(w, "bench %s | %s | B %d × T %d, %s, %s parameters\n", be.Name(), what, B, T, dt, groupDigits(int64(cfg.NumParams())))
	fmt.Fprintf(w, "step %.1f ms | %.0f tokens/s | %s", res.stepSec*1e3, res.tokensPerSec, flopRate(res.tokensPerSec*flops))
	if peak > 0 {
		fmt.Fprintf(w, " | MFU %.1f%% of %s", 100*metrics.MFU(res.tokensPerSec, flops, peak), flopRate(peak))
	} else {
		fmt.Fprint(w, " | MFU n/a (pass --peak-flops)")
	}
	fmt.Fprintf(w, " | activations %.0f MiB | loss %.3f\n", float64(res.actBytes)/(1<<20), res.loss)
	return nil
}

// startCPUProfile starts a CPU profile into path ("": none) and returns
// the function that stops it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile %s: %w (give a writable path)", path, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w (is another profile running?)", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}

// benchRoofline is a CPU bench's peak FLOP/s: measured after the steps,
// warm, on the shapes they ran, with the GEMM they used, raised to the
// machine's roofline when that is higher. An fp32 run records its rate as
// the machine's sgemm roofline when it is the best yet (a quieter moment
// than the choice's); a bf16 run's products run on the bf16 kernel at up to
// twice the fp32 rate, its MFU is taken against that, and it records
// nothing: the sgemm roofline is fp32's.
func benchRoofline(gemm cpuGEMM, rec *blas.Recorder, what string) (float64, string) {
	shapes := append(rec.Top(6), blas.SquareShape)
	bf16 := slices.ContainsFunc(shapes, func(s blas.Shape) bool { return s.BF16 })
	g, best := blas.MeasureRoofline(gemm.impl, shapes, 1)
	if bf16 {
		peak := max(g*1e9, gemm.roofline)
		return peak, what + fmt.Sprintf(", roofline %s (the best of this run's bf16 GEMM, %.1f GFLOP/s at %s, and the machine's sgemm)",
			flopRate(peak), g, shapeString(best))
	}
	peak := gemm.raiseRoofline(g * 1e9)
	return peak, what + fmt.Sprintf(", roofline %s (the machine's best sgemm, either GEMM; this run's GEMM %.1f GFLOP/s at %s)",
		flopRate(peak), g, shapeString(best))
}

// shapeString names a GEMM shape as M×N×K with its transposes (NT: A as
// stored, B transposed).
func shapeString(s blas.Shape) string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%d×%d×%d %s%s", s.M, s.N, s.K, t(s.TransA), t(s.TransB))
}

// benchShape reads the model, batch, sequence length, step count and
// dtype flags; --dtype auto depends on the device.
func benchShape(c *cli.Context, device string) (cfg model.Config, B, T int, dt backend.DType, err error) {
	cfg, err = model.ByName(c.String("model"))
	if err != nil {
		return cfg, 0, 0, 0, fmt.Errorf("--model: %w", err)
	}
	B, T = c.Int("batch"), c.Int("seq-len")
	if B < 1 || T < 1 || T > cfg.MaxT || c.Int("steps") < 1 {
		return cfg, 0, 0, 0, fmt.Errorf("bench: need batch ≥ 1, 1 ≤ seq-len ≤ %d (the model's context) and steps ≥ 1", cfg.MaxT)
	}
	switch c.String("dtype") {
	case "auto":
		// On the CPU, bf16 only where its GEMM is faster: decided once the
		// GEMM is chosen (runBench).
		dt = backend.BF16
		if device == "cpu" {
			dt = backend.F32
		}
	case "fp32":
		dt = backend.F32
	case "bf16":
		dt = backend.BF16
	default:
		return cfg, 0, 0, 0, fmt.Errorf("--dtype %q: want fp32, bf16 or auto", c.String("dtype"))
	}
	return cfg, B, T, dt, nil
}

// runBenchDry is bench --dry-run: the trainer's step on backend/meta,
// traced, priced by the cost model for --gpu.
func runBenchDry(c *cli.Context) error {
	if d := c.String("device"); d != "cuda" && d != "auto" {
		return fmt.Errorf("bench --dry-run prices the CUDA backend's step: use --device cuda (or auto), not %q", d)
	}
	gpu, err := costmodel.LookupGPU(c.String("gpu"))
	if err != nil {
		return fmt.Errorf("--gpu: %w", err)
	}
	cfg, B, T, dt, err := benchShape(c, "cuda")
	if err != nil {
		return err
	}
	trace, err := traceStep(cfg, B, T, dt, c.Bool("gradient-checkpointing"))
	if err != nil {
		return err
	}
	rep := costmodel.Estimate(trace, gpu, cfg.FlopsPerToken(T)*float64(B*T))
	what := fmt.Sprintf("%s (%s parameters), B %d × T %d, %s", c.String("model"), groupDigits(int64(cfg.NumParams())), B, T, dt)
	return rep.Write(c.App.Writer, what, 0)
}

// traceStep runs two training steps on the accounting backend and returns
// the ops of the second: the first builds what a step grows into (its
// trace would carry that), the second is every step after it.
func traceStep(cfg model.Config, B, T int, dt backend.DType, ckpt bool) ([]meta.Call, error) {
	be := meta.New(meta.Options{Name: "cuda (cost model)", Trace: true})
	obs := &stepTracer{be: be}
	if _, err := runBenchTrainer(be, cfg, B, T, 2, dt, ckpt, obs); err != nil {
		return nil, err
	}
	if obs.trace == nil {
		return nil, fmt.Errorf("bench --dry-run: the trainer took no second step to trace")
	}
	return obs.trace, nil
}

// stepTracer keeps the trace of step 2.
type stepTracer struct {
	be    *meta.Backend
	trace []meta.Call
}

func (s *stepTracer) ObserveStep(rec metrics.StepRecord, _ backend.MemoryStats, _ metrics.CommCounters) {
	switch rec.Step {
	case 1:
		s.be.ResetTrace()
	case 2:
		s.trace = s.be.Trace()
	}
}

func gpuKeys() []string {
	var keys []string
	for _, g := range costmodel.GPUs() {
		keys = append(keys, g.Key)
	}
	return keys
}

type benchResult struct {
	stepSec, tokensPerSec float64
	actBytes              int64
	loss                  float64
}

// benchSteps times steps training steps (forward, backward, AdamW with an
// fp32 master and moments) after one warm-up step: the trainer's own step,
// one rank at ZeRO stage 0, on a fixed batch of random tokens.
func benchSteps(be backend.Backend, cfg model.Config, B, T, steps int, dt backend.DType, ckpt bool) (benchResult, error) {
	res, err := runBenchTrainer(be, cfg, B, T, steps+1, dt, ckpt, nil)
	if err != nil {
		return benchResult{}, err
	}
	act := res.Memory.Current[backend.Device][backend.Activations]
	return benchResult{stepSec: float64(B*T) / res.TokensPerSecond, tokensPerSec: res.TokensPerSecond, actBytes: act, loss: res.FinalLoss}, nil
}

// runBenchTrainer runs the trainer for steps steps on one rank at ZeRO
// stage 0 with a fixed batch of random tokens.
func runBenchTrainer(be backend.Backend, cfg model.Config, B, T, steps int, dt backend.DType, ckpt bool,
	obs trainer.Observer) (*trainer.Result, error) {
	js := fmt.Sprintf(`{"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 1,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0}},
		"bf16": {"enabled": %t}}`, B, dt == backend.BF16)
	dsc, err := config.Parse("(bench)", []byte(js), config.Options{Strict: true})
	if err != nil {
		return nil, err
	}
	batch, err := dsc.Resolve(1)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := make([]int32, B*T+1)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(cfg.V))
	}
	o := trainer.Options{Config: dsc, Batch: batch, Model: cfg, Seed: 1, SeqLen: T, MaxSteps: steps,
		Batches: fixedBatch(tokens), Checkpoint: ckpt}
	if obs != nil {
		o.Observer = obs
	}
	return trainer.Run(context.Background(), be, o)
}

// fixedBatch serves the same B·T+1 tokens as every micro-batch.
type fixedBatch []int32

func (f fixedBatch) Next(inputs, targets []int32) error {
	copy(inputs, f[:len(f)-1])
	copy(targets, f[1:])
	return nil
}

// flopRate formats FLOP/s in the unit that suits a CPU (GFLOP/s) or a GPU
// (TFLOP/s).
func flopRate(f float64) string {
	if f >= 1e12 {
		return fmt.Sprintf("%.1f TFLOP/s", f/1e12)
	}
	return fmt.Sprintf("%.1f GFLOP/s", f/1e9)
}
