package trainer_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// markovTokens is learnable text: each token mostly follows from the last.
func markovTokens(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 3))
	next := make([]int32, vocab)
	for i := range next {
		next[i] = int32(rng.IntN(vocab))
	}
	out := make([]int32, n)
	for i := 1; i < n; i++ {
		if rng.IntN(8) == 0 {
			out[i] = int32(rng.IntN(vocab))
		} else {
			out[i] = next[out[i-1]]
		}
	}
	return out
}

// TestBF16TracksFP32: gpt2-tiny's shape (L4 NH4 C256) with a byte
// vocabulary, trained 20 steps with bf16 parameters and activations (fp32
// master weights, moments and gradient accumulation), stays within 0.05 of
// the fp32 run's loss at every step and converges.
func TestBF16TracksFP32(t *testing.T) {
	mcfg, _ := model.Preset("gpt2-tiny")
	mcfg.V, mcfg.Vp = 257, model.PadVocab(257)
	dir := t.TempDir()
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, markovTokens(21*4*64+1, 257, 1)); err != nil {
		t.Fatal(err)
	}
	impl, _ := blas.Default(0)
	runWith := func(precision string) []float64 {
		src := `{"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
			"optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}},
			"bf16": {"enabled": ` + map[string]string{"fp32": "false", "bf16": "true"}[precision] + `}}`
		cfg, err := config.Parse(precision+".json", []byte(src), config.Options{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		batch, _ := cfg.Resolve(1)
		out := filepath.Join(dir, precision)
		if _, err := trainer.Run(context.Background(), cpu.New(cpu.Options{Gemm: impl}), trainer.Options{
			Config: cfg, Batch: batch, Model: mcfg, Seed: 7, Data: []string{shard}, SeqLen: 64, MaxSteps: 20, OutputDir: out,
		}); err != nil {
			t.Fatal(err)
		}
		var losses []float64
		for _, s := range readSteps(t, filepath.Join(out, "metrics.jsonl")) {
			losses = append(losses, s.Loss)
		}
		return losses
	}
	fp32, bf16 := runWith("fp32"), runWith("bf16")
	worst := 0.0
	for i := range fp32 {
		worst = max(worst, math.Abs(bf16[i]-fp32[i]))
	}
	if worst > 0.05 {
		t.Errorf("bf16 loss departs from fp32 by up to %.4f (want ≤ 0.05)\nfp32 %.4f\nbf16 %.4f", worst, fp32, bf16)
	}
	if !(bf16[19] < bf16[0]-1) {
		t.Errorf("bf16 did not converge: loss %.4f → %.4f", bf16[0], bf16[19])
	}
	t.Logf("20 steps: fp32 %.4f → %.4f, bf16 %.4f → %.4f, largest gap %.4f", fp32[0], fp32[19], bf16[0], bf16[19], worst)
}
