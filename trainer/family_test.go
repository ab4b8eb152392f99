package trainer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
	"github.com/gotrain/gotrain/comm/tcp"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// familyFixture is one llama_tiny case's ten reference AdamW steps
// (model/testdata/make_llama_fixtures.py: float64 maths, gradient
// accumulation 2, clipping at 1.0, WarmupLR with DeepSpeed's timing, weight
// decay on matrices and embeddings only).
type familyFixture struct {
	dir                string
	tokens             []int32
	losses, lrs, norms []float32
	final              map[string][]float32
	dsConfig           map[string]any
	seqLen             int
	model              model.Config
}

func loadFamilyFixture(t *testing.T, name string) familyFixture {
	t.Helper()
	dir := filepath.Join("..", "model", "testdata", "llama_tiny", name)
	ref, err := model.OpenSafetensors(filepath.Join(dir, "training_steps.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	f := familyFixture{dir: dir, final: map[string][]float32{}}
	read := func(n string) []float32 {
		v, _, err := ref.ReadFloat32(n)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if f.tokens, _, err = ref.ReadInt32("tokens"); err != nil {
		t.Fatal(err)
	}
	f.losses, f.lrs, f.norms = read("losses"), read("lrs"), read("grad_norms")
	for _, h := range ref.Tensors() {
		if n, ok := cutPrefix(h.Name, "final."); ok {
			f.final[n] = read(h.Name)
		}
	}
	if f.seqLen, err = strconv.Atoi(ref.Metadata()["seq_len"]); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(ref.Metadata()["deepspeed_config"]), &f.dsConfig); err != nil {
		t.Fatal(err)
	}
	if f.model, err = model.LoadHFConfig(filepath.Join(dir, "config.json")); err != nil {
		t.Fatal(err)
	}
	return f
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// config is the fixture's DeepSpeed config with edit applied, resolved for
// world ranks.
func (f familyFixture) config(t *testing.T, world int, edit func(m map[string]any)) (*config.Config, config.Batch) {
	t.Helper()
	m := map[string]any{}
	raw, _ := json.Marshal(f.dsConfig)
	json.Unmarshal(raw, &m)
	if edit != nil {
		edit(m)
	}
	raw, _ = json.Marshal(m)
	cfg, err := config.Parse("training_steps.safetensors:deepspeed_config", raw, config.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cfg.Resolve(world)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, batch
}

// check compares a run's metrics.jsonl and final weights with the
// reference: losses and gradient norms within 1e-4 relative, learning
// rates within 1e-6, every final weight within 1e-3 (ten AdamW steps at lr
// 1e-2 in float32 against float64).
func (f familyFixture) check(t *testing.T, out string) {
	t.Helper()
	steps := readSteps(t, filepath.Join(out, "metrics.jsonl"))
	if len(steps) != len(f.losses) {
		t.Fatalf("metrics.jsonl has %d step lines, want %d", len(steps), len(f.losses))
	}
	for i, s := range steps {
		check := func(what string, got, want float64, rtol float64) {
			if math.Abs(got-want) > 1e-6+rtol*math.Abs(want) {
				t.Errorf("step %d %s: got %.7g, reference %.7g (rel %.2e)", i+1, what, got, want, math.Abs(got-want)/math.Abs(want))
			}
		}
		check("loss", s.Loss, float64(f.losses[i]), 1e-4)
		check("lr", s.LR, float64(f.lrs[i]), 1e-6)
		check("grad norm", s.GradNorm, float64(f.norms[i]), 1e-4)
	}
	cfg, params, err := model.LoadSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != f.model {
		t.Errorf("output config.json reads back as %v, want %v", cfg, f.model)
	}
	lay := model.NewLayout(cfg)
	worst, where := 0.0, ""
	for _, tn := range lay.Tensors() {
		want, ok := f.final[tn.Name]
		if !ok {
			t.Errorf("no reference final.%s", tn.Name)
			continue
		}
		for i, w := range want {
			if d := math.Abs(float64(params[tn.Offset+i]) - float64(w)); d > worst {
				worst, where = d, fmt.Sprintf("%s[%d]", tn.Name, i)
			}
		}
	}
	if worst > 1e-3 {
		t.Errorf("final weights: largest difference %.3g at %s", worst, where)
	}
}

// run trains the fixture's ten steps on world ranks and returns rank 0's
// output directory.
func (f familyFixture) run(t *testing.T, world int, edit func(map[string]any)) string {
	t.Helper()
	return f.runIn(t, t.TempDir(), world, len(f.losses), edit, nil)
}

// runIn trains the fixture on world ranks in this process (loopback TCP
// between them, as separate processes connect) up to step steps, with the
// shard and output directory in dir, and returns rank 0's output
// directory; tweak adjusts each rank's options.
func (f familyFixture) runIn(t *testing.T, dir string, world, steps int, edit func(map[string]any), tweak func(*trainer.Options)) string {
	t.Helper()
	out, err := f.runErr(t, dir, world, steps, edit, tweak)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runErr is runIn returning the first rank's error.
func (f familyFixture) runErr(t *testing.T, dir string, world, steps int, edit func(map[string]any), tweak func(*trainer.Options)) (string, error) {
	t.Helper()
	cfg, batch := f.config(t, world, edit)
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, f.tokens); err != nil {
		t.Fatal(err)
	}
	bes := make([]backend.Backend, world)
	for r := range bes {
		bes[r] = cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	}
	comms := make([]comm.Comm, world)
	if world > 1 {
		ranks := commtest.NewWorld(t, world, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
			c, err := tcp.New(ctx, st, bes[r], tcp.Options{Rank: r, Size: size, Timeout: 20 * time.Second})
			return c, bes[r], err
		})
		for r, rk := range ranks {
			comms[r] = rk.Comm
		}
	}
	out := filepath.Join(dir, "out")
	errs := commtest.OnEveryRank(world, func(r int) error {
		o := trainer.Options{
			Config: cfg, Batch: batch, Model: f.model, Comm: comms[r], InitFrom: f.dir,
			Data: []string{shard}, SeqLen: f.seqLen, MaxSteps: steps, OutputDir: out,
		}
		if tweak != nil {
			tweak(&o)
		}
		_, err := trainer.Run(context.Background(), bes[r], o)
		return err
	})
	return out, commtest.FirstErr(errs)
}

// TestFamilyTrainingMatchesReference: every Llama-family case with a
// training fixture (Llama with GQA, MQA and llama3 RoPE with every bias and
// a tied head, linear RoPE from BF16 shards, Qwen2's q/k/v biases, Qwen3's
// q/k norms), started from its snapshot directory, trains ten steps on one
// rank whose losses, learning rates, gradient norms and final weights match
// the float64 reference.
func TestFamilyTrainingMatchesReference(t *testing.T) {
	for _, name := range []string{"llama_gqa", "llama_mqa_llama3rope", "llama_linear_rope", "qwen2_bias", "qwen3_qknorm"} {
		t.Run(name, func(t *testing.T) {
			f := loadFamilyFixture(t, name)
			f.check(t, f.run(t, 1, nil))
		})
	}
}

// TestFamilyTrainingTwoRanks: two ranks with gradient accumulation 1 see
// the fixture's global batch of two micro-batches per step, so they match
// the same reference at ZeRO-3 (every group partitioned: persistence
// threshold 0) and at ZeRO-2 with the optimizer offloaded to the host.
func TestFamilyTrainingTwoRanks(t *testing.T) {
	cases := []struct {
		name, fixture string
		zero          map[string]any
	}{
		{"zero3", "qwen3_qknorm", map[string]any{"stage": 3, "stage3_param_persistence_threshold": 0}},
		{"zero2-offload", "llama_linear_rope", map[string]any{"stage": 2, "offload_optimizer": map[string]any{"device": "cpu"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := loadFamilyFixture(t, c.fixture)
			out := f.run(t, 2, func(m map[string]any) {
				m["gradient_accumulation_steps"] = 1
				m["zero_optimization"] = c.zero
			})
			f.check(t, out)
		})
	}
	// Both offloads with activation checkpointing (kept in host memory):
	// recomputation and host-resident parameters change no bit.
	t.Run("zero3-offload-both-checkpointing", func(t *testing.T) {
		f := loadFamilyFixture(t, "llama_mqa_llama3rope")
		out := f.runIn(t, t.TempDir(), 2, len(f.losses), func(m map[string]any) {
			m["gradient_accumulation_steps"] = 1
			m["zero_optimization"] = map[string]any{"stage": 3, "offload_param": map[string]any{"device": "cpu"},
				"offload_optimizer": map[string]any{"device": "cpu"}}
		}, func(o *trainer.Options) { o.Checkpoint, o.CheckpointHost = true, true })
		f.check(t, out)
	})
}

// TestFamilyResumeReshards: five steps on two ranks at ZeRO-3 (gradient
// accumulation 1), then a resume of the same checkpoints on one rank at
// ZeRO-1 with gradient accumulation 2 (the same global batch) for steps
// 6–10: the appended metrics.jsonl and the final weights match the
// reference's ten steps, so the checkpoint reshards the family's state
// exactly across world size and stage.
func TestFamilyResumeReshards(t *testing.T) {
	f := loadFamilyFixture(t, "qwen2_bias")
	dir := t.TempDir()
	f.runIn(t, dir, 2, 5, func(m map[string]any) {
		m["gradient_accumulation_steps"] = 1
		m["zero_optimization"] = map[string]any{"stage": 3, "stage3_param_persistence_threshold": 0}
	}, nil)
	out := f.runIn(t, dir, 1, len(f.losses), func(m map[string]any) {
		m["zero_optimization"] = map[string]any{"stage": 1}
	}, func(o *trainer.Options) { o.Resume, o.AllowConfigChange = "auto", true })
	f.check(t, out)
}

// TestFamilyMixedPrecision: bf16 and fp16 (loss-scaled) runs of the
// fixture track the float64 reference's losses within 2% over ten steps,
// with fp32 master weights and moments (16-bit storage, fp32 compute).
func TestFamilyMixedPrecision(t *testing.T) {
	f := loadFamilyFixture(t, "qwen3_qknorm")
	for _, prec := range []string{"bf16", "fp16"} {
		t.Run(prec, func(t *testing.T) {
			out := f.run(t, 1, func(m map[string]any) {
				m[prec] = map[string]any{"enabled": true}
				if prec == "fp16" {
					m[prec] = map[string]any{"enabled": true, "initial_scale_power": 8}
				}
			})
			steps := readSteps(t, filepath.Join(out, "metrics.jsonl"))
			if len(steps) != len(f.losses) {
				t.Fatalf("%d steps logged, want %d", len(steps), len(f.losses))
			}
			for i, s := range steps {
				if want := float64(f.losses[i]); math.Abs(s.Loss-want) > 0.02*want {
					t.Errorf("step %d: %s loss %.5f, reference %.5f", i+1, prec, s.Loss, want)
				}
			}
		})
	}
}
