package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/compare"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// `gotrain doctor --e2e`: the whole training step on the device against
// the CPU backend. A tiny Qwen3 (grouped-query attention, q/k norms,
// RoPE, SwiGLU) and a GPT-2 of gpt2-tiny's shape train
// for a few steps on each from the same seed and the same tokens, and the
// per-step losses must agree within a tolerance that depends on the dtype.
// Op-by-op checks (--selftest) miss what only a step shows: the order of
// the ops, buffers reused between them, the optimizer and clipping, and
// the trainer's device-side reductions.

// e2eSeed seeds the initial weights and the tokens of every run.
const e2eSeed = 1234

// e2eTol is the largest |loss(device) − loss(cpu)| / loss(cpu) a step may
// show in dt. Both backends start from the same weights and see the same
// tokens; they differ only in how each op rounds (the order of a GEMM's
// sums, fused kernels), and AdamW can amplify a last-bit difference in a
// near-zero gradient (its first steps move each weight by about the
// learning rate whatever the gradient's size), though few weights sit
// there. The loss is not sensitive to small errors: every GEMM 0.1% off
// moves it by 5e-5 of itself after two steps, 4e-4 after twenty; 1% off,
// ten times that (measured on the emulated GPU).
//
// fp32: 2e-5, the most one op's result may differ (the op comparison's
// fp32 tolerance). The emulated GPU's runs agree to 1e-7 of the loss over
// 20 steps, so a real GPU's other summation orders have a wide margin,
// and a GEMM 0.1% off fails from the second step.
//
// bf16: 2e-3, half an ulp of bf16 at the loss's own scale (2^-9). Weights
// and activations keep 8 significant bits: once the backends' fp32
// intermediates differ in the last bit, some roundings land one ulp
// (0.4–0.8%) apart, and the loss, an average over many of them, drifts by
// far less (2e-4 of it over 20 steps emulated). A GEMM 1% off fails
// within 20 steps; one 0.1% off is below what bf16 resolves.
func e2eTol(dt backend.DType) float64 {
	if dt == backend.BF16 {
		return 2e-3
	}
	return 2e-5
}

// doctorE2EFlags are doctor's flags for --e2e (it shares --device,
// --gpu, --threads and --shapes).
func doctorE2EFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "e2e", Usage: "train a tiny Qwen3 and a gpt2-tiny for --e2e-steps on --device and on the CPU backend from " +
			"the same seed and tokens, print the losses side by side and fail beyond a per-dtype tolerance"},
		&cli.IntFlag{Name: "e2e-steps", Value: 20, Usage: "--e2e: optimizer steps per run"},
		&cli.StringFlag{Name: "dtype", Value: "both", Usage: "--e2e: fp32, bf16 or both"},
	}
}

// e2eModel is one model --e2e trains, with its micro-batch.
type e2eModel struct {
	name string
	cfg  model.Config
	B, T int
}

// e2eModels are the models at size z. Full: a Qwen3 of 4 layers, hidden
// 256, 8 query heads over 2 key/value heads of 128 (attention wider than
// the hidden size, as Qwen3's), Qwen's vocabulary, one sequence a step;
// and gpt2-tiny as the preset has it, two sequences; both at T = 256,
// which the CUDA backend's attention runs in two query chunks. Small: the
// same architectures at sizes the CPU emulation of a GPU trains in
// seconds.
func e2eModels(z compare.Size) ([]e2eModel, error) {
	type dims struct{ L, C, NH, KV, HD, FF, V, B, T int }
	qd, gpt := dims{4, 256, 8, 2, 128, 768, 151936, 1, 256}, "gpt2-tiny"
	if z == compare.Small {
		qd = dims{2, 48, 4, 2, 16, 96, 384, 2, 24}
	}
	q, err := model.ParseHFConfig("qwen3-tiny", []byte(fmt.Sprintf(`{"architectures": ["Qwen3ForCausalLM"],
		"model_type": "qwen3", "attention_bias": false, "head_dim": %d, "hidden_act": "silu", "hidden_size": %d,
		"initializer_range": 0.02, "intermediate_size": %d, "max_position_embeddings": 4096, "num_attention_heads": %d,
		"num_hidden_layers": %d, "num_key_value_heads": %d, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
		"tie_word_embeddings": true, "vocab_size": %d}`, qd.HD, qd.C, qd.FF, qd.NH, qd.L, qd.KV, qd.V)))
	if err != nil {
		return nil, fmt.Errorf("doctor --e2e: the tiny Qwen3: %w", err)
	}
	g, ok := model.Preset(gpt)
	gB, gT := 2, 256
	if z == compare.Small {
		gpt = "gpt2 small"
		g = model.GPT2(model.Config{MaxT: 64, V: 300, Vp: model.PadVocab(300), L: 2, NH: 2, C: 32})
		ok, gB, gT = true, 2, 24
	}
	if !ok {
		return nil, fmt.Errorf("doctor --e2e: no preset %s", gpt)
	}
	return []e2eModel{{"qwen3-tiny", q, qd.B, qd.T}, {gpt, g, gB, gT}}, nil
}

func (m e2eModel) String() string {
	c := m.cfg
	return fmt.Sprintf("%s: %s, L%d C%d NH%d KV%d HD%d FF%d V%d, B%d × T%d, %.1fM parameters", m.name, c.Arch, c.L, c.C,
		c.NH, c.KV, c.HD, c.FF, c.V, m.B, m.T, float64(c.NumParams())/1e6)
}

// e2eDTypes reads --dtype.
func e2eDTypes(s string) ([]backend.DType, error) {
	switch s {
	case "fp32":
		return []backend.DType{backend.F32}, nil
	case "bf16":
		return []backend.DType{backend.BF16}, nil
	case "both":
		return []backend.DType{backend.F32, backend.BF16}, nil
	}
	return nil, fmt.Errorf("doctor --dtype %q: want fp32, bf16 or both", s)
}

// runE2E is doctor --e2e.
func runE2E(c *cli.Context, threads int) error {
	w := c.App.Writer
	size, err := compare.ParseSize(c.String("shapes"))
	if err != nil {
		return fmt.Errorf("doctor --shapes: %w", err)
	}
	dts, err := e2eDTypes(c.String("dtype"))
	if err != nil {
		return err
	}
	steps := c.Int("e2e-steps")
	if steps < 2 {
		return fmt.Errorf("doctor --e2e-steps %d: want at least 2 (the loss must be seen to fall)", steps)
	}
	models, err := e2eModels(size)
	if err != nil {
		return err
	}
	device, note, err := resolveDevice(c.String("device"), 1)
	if err != nil {
		return err
	}
	if note != "" {
		fmt.Fprintf(c.App.ErrWriter, "info: --device auto chose the CPU: %s\n", note)
	}
	impl, _ := blas.Default(threads)
	newCPU := func() backend.Backend { return cpu.New(cpu.Options{Gemm: impl, Threads: threads}) }
	var dev backend.Backend
	if device == "cuda" {
		gpu, err := openGPU(c.Int("gpu"), threads, false)
		if err != nil {
			return err
		}
		defer gpu.Close()
		dev = gpu.be
		gi := gpu.dev.Info()
		fmt.Fprintf(w, "e2e on %s (%s, sm_%d) against the CPU backend (%d threads)\n", dev.Name(), gi.Name, gi.SM(), threads)
	} else {
		dev = newCPU()
		fmt.Fprintf(w, "e2e on the CPU backend against itself (%d threads): the two runs must agree exactly\n", threads)
	}
	fmt.Fprintf(w, "each run: %d AdamW steps from seed %d on one fixed batch of random tokens (memorised, so the loss falls)\n\n",
		steps, e2eSeed)
	failed := 0
	for _, dt := range dts {
		for _, m := range models {
			tol := e2eTol(dt)
			if device != "cuda" {
				tol = 0
			}
			ok, err := e2eCompare(c.Context, w, m, dt, steps, tol, dev, newCPU())
			if err != nil {
				return err
			}
			if !ok {
				failed++
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("doctor --e2e: %d of %d runs differ from the CPU backend beyond tolerance (see the tables)",
			failed, len(dts)*len(models))
	}
	fmt.Fprintln(w, "e2e passed")
	return nil
}

// e2eCompare trains m in dt on dev and on the CPU backend ref, prints the
// table of losses, and reports whether every step agreed within tol and
// the loss fell.
func e2eCompare(ctx context.Context, w io.Writer, m e2eModel, dt backend.DType, steps int, tol float64,
	dev, ref backend.Backend) (bool, error) {
	fmt.Fprintf(w, "%s, %s\n", m, dt)
	start := time.Now()
	got, err := e2eTrain(ctx, dev, m, dt, steps)
	if err != nil {
		return false, fmt.Errorf("doctor --e2e: %s %s on %s: %w", m.name, dt, dev.Name(), err)
	}
	devTime := time.Since(start)
	start = time.Now()
	want, err := e2eTrain(ctx, ref, m, dt, steps)
	if err != nil {
		return false, fmt.Errorf("doctor --e2e: %s %s on the CPU: %w", m.name, dt, err)
	}
	cpuTime := time.Since(start)
	name := dev.Name()
	fmt.Fprintf(w, "%5s  %14s  %14s  %9s  %9s\n", "step", "loss("+name+")", "loss(cpu ref)", "|diff|", "limit")
	ok := true
	worst, worstStep := 0.0, 0
	for i := range want {
		d := math.Abs(got[i] - want[i])
		lim := tol * math.Abs(want[i])
		verdict := "PASS"
		if !(d <= lim) {
			verdict, ok = "FAIL", false
		}
		if d > worst || i == 0 {
			worst, worstStep = d, i+1
		}
		fmt.Fprintf(w, "%5d  %14.7f  %14.7f  %9.2e  %9.2e  %s\n", i+1, got[i], want[i], d, lim, verdict)
	}
	fell := want[len(want)-1] < want[0]
	verdict := "PASS"
	if !ok || !fell {
		verdict = "FAIL"
	}
	tolText := fmt.Sprintf("%.0e of the CPU's loss", tol)
	if tol == 0 {
		tolText = "0 (the same backend twice agrees exactly)"
	}
	fmt.Fprintf(w, "%s %s: %s; max |diff| %.2e at step %d; tolerance %s; loss %.4f → %.4f; %s %s, cpu ref %s\n",
		m.name, dt, verdict, worst, worstStep, tolText, want[0], want[len(want)-1], name, devTime.Round(time.Millisecond),
		cpuTime.Round(time.Millisecond))
	if !fell {
		fmt.Fprintf(w, "    the CPU's loss did not fall, so agreement would show little: the step itself is broken\n")
	}
	fmt.Fprintln(w)
	return ok && fell, nil
}

// e2eTrain runs steps optimizer steps of m in dt on be (one rank, ZeRO
// stage 0) and returns each step's loss.
func e2eTrain(ctx context.Context, be backend.Backend, m e2eModel, dt backend.DType, steps int) ([]float64, error) {
	js := fmt.Sprintf(`{"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
		"bf16": {"enabled": %t}}`, m.B, dt == backend.BF16)
	dsc, err := config.Parse("(doctor --e2e)", []byte(js), config.Options{Strict: true})
	if err != nil {
		return nil, err
	}
	batch, err := dsc.Resolve(1)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(e2eSeed, uint64(m.cfg.V)))
	tokens := make([]int32, m.B*m.T+1)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(m.cfg.V))
	}
	rec := &lossRecorder{}
	_, err = trainer.Run(ctx, be, trainer.Options{Config: dsc, Batch: batch, Model: m.cfg, Seed: e2eSeed, SeqLen: m.T,
		MaxSteps: steps, Batches: fixedBatch(tokens), Observer: rec})
	if err != nil {
		return nil, err
	}
	if len(rec.losses) != steps {
		return nil, fmt.Errorf("%d steps reported, want %d", len(rec.losses), steps)
	}
	return rec.losses, nil
}

// lossRecorder keeps each step's loss.
type lossRecorder struct{ losses []float64 }

func (l *lossRecorder) ObserveStep(rec metrics.StepRecord, _ backend.MemoryStats, _ metrics.CommCounters) {
	l.losses = append(l.losses, rec.Loss)
}
