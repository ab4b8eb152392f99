package trainer_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

type fp16Step struct {
	Loss      float64 `json:"loss"`
	LR        float64 `json:"lr"`
	GradNorm  float64 `json:"grad_norm"`
	LossScale float64 `json:"loss_scale"`
	Skipped   bool    `json:"skipped"`
}

// TestFP16OverflowSkipsTheStepAndHalvesTheScale trains in fp16 from a loss
// scale of 2^24, so the first steps' gradients overflow fp16. Every batch is
// the same, so a skipped step that really changed nothing (weights,
// scheduler, AdamW's step count) leaves the run in exactly the state of a run
// that started at the first scale that works: from there the two runs must
// agree bit for bit. Each overflow halves the scale (hysteresis 1).
func TestFP16OverflowSkipsTheStepAndHalvesTheScale(t *testing.T) {
	mcfg := model.GPT2(model.Config{MaxT: 16, V: 64, Vp: 128, L: 2, NH: 2, C: 32})
	const B, T, steps, power = 4, 16, 8, 24
	batch := markovTokens(B*T+1, 64, 9)
	tokens := make([]int32, 0, (steps+2)*B*T+1)
	for range steps + 2 {
		tokens = append(tokens, batch[:B*T]...)
	}
	tokens = append(tokens, batch[B*T])
	dir := t.TempDir()
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, tokens); err != nil {
		t.Fatal(err)
	}
	run := func(name string, pow int, maxSteps int) []fp16Step {
		src := `{"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0,
			"optimizer": {"type": "AdamW", "params": {"lr": 1e-2}},
			"scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-3, "warmup_max_lr": 1e-2, "warmup_num_steps": 5, "warmup_type": "linear"}},
			"fp16": {"enabled": true, "initial_scale_power": ` + strconv.Itoa(pow) + `, "hysteresis": 1, "loss_scale_window": 1000}}`
		cfg, err := config.Parse(name+".json", []byte(src), config.Options{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := cfg.Resolve(1)
		out := filepath.Join(dir, name)
		var log strings.Builder
		if _, err := trainer.Run(context.Background(), cpu.New(cpu.Options{Gemm: blas.Gonum{}}), trainer.Options{
			Config: cfg, Batch: b, Model: mcfg, Seed: 3, Data: []string{shard}, SeqLen: T, MaxSteps: maxSteps,
			OutputDir: out, Log: &log,
		}); err != nil {
			t.Fatal(err)
		}
		if pow == power && !strings.Contains(log.String(), "OVERFLOW! Rank 0 Skipping step") {
			t.Errorf("no DeepSpeed-style overflow line in the log:\n%s", log.String())
		}
		raw, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var got []fp16Step
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var s fp16Step
			if err := json.Unmarshal([]byte(line), &s); err != nil {
				t.Fatal(err)
			}
			got = append(got, s)
		}
		return got
	}
	a := run("overflowing", power, steps)
	k := 0
	for k < len(a) && a[k].Skipped {
		if want := math.Ldexp(1, power-k); a[k].LossScale != want {
			t.Errorf("overflow step %d ran at scale %g, want %g (halved once per overflow)", k+1, a[k].LossScale, want)
		}
		k++
	}
	if k == 0 || k >= steps-3 {
		t.Fatalf("%d of %d steps overflowed; the test needs a few overflows and then training", k, steps)
	}
	for _, s := range a[k:] {
		if s.Skipped {
			t.Fatalf("an overflow after the scale settled: %+v", a)
		}
	}
	b := run("settled", power-k, steps-k)
	for j := range b {
		x, y := a[k+j], b[j]
		if x.Loss != y.Loss || x.LR != y.LR || x.GradNorm != y.GradNorm || x.LossScale != y.LossScale {
			t.Fatalf("after %d skipped steps, step %d differs from the run that started at scale 2^%d: %+v vs %+v",
				k, k+j+1, power-k, x, y)
		}
	}
	if !(a[steps-1].Loss < a[k].Loss) {
		t.Errorf("fp16 did not train: loss %.4f → %.4f", a[k].Loss, a[steps-1].Loss)
	}
	t.Logf("%d steps overflowed (scale 2^%d → 2^%d), then training matched the settled run exactly; loss %.4f → %.4f",
		k, power, power-k, a[k].Loss, a[steps-1].Loss)
}
