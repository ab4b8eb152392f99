package trainer_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// layout sets the micro-batch, the gradient accumulation and the ZeRO
// stage of a fixture's config.
func layout(micro, gas, stage int) func(map[string]any) {
	return func(m map[string]any) {
		m["train_micro_batch_size_per_gpu"] = micro
		m["gradient_accumulation_steps"] = gas
		m["zero_optimization"] = map[string]any{"stage": stage, "stage3_param_persistence_threshold": 0}
	}
}

// randomTokens are n token ids below v, from a fixed seed.
func randomTokens(n, v int) []int32 {
	r := rand.New(rand.NewPCG(7, 11))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(v))
	}
	return out
}

// The defect: a run saved by 2 ranks at ZeRO-3 with micro-batch 2 ×
// gradient accumulation 2 and resumed by 1 rank at ZeRO-0 with micro-batch
// 2 × accumulation 4 — the same 8 samples a step, in the same order — was
// refused ("batch.gradient_accumulation 2 → 4 (changes the math)"). It
// must resume without --allow-config-change, and its steps 5–8 must match
// an uninterrupted 2-rank run's: the same losses and gradient norms and
// final weights, up to float32 summation order.
func TestResumeOnAnotherBatchLayoutOfTheSameGlobalBatch(t *testing.T) {
	f := loadFamilyFixture(t, "qwen2_bias")
	const steps, perStep = 8, 8
	f.tokens = randomTokens(steps*perStep*f.seqLen+1, f.model.V)
	whole := f.runIn(t, t.TempDir(), 2, steps, layout(2, 2, 3), nil)

	dir := t.TempDir()
	f.runIn(t, dir, 2, steps/2, layout(2, 2, 3), nil)
	var log bytes.Buffer
	resumed := f.runIn(t, dir, 1, steps, layout(2, 4, 0), func(o *trainer.Options) { o.Resume, o.Log = "auto", &log })
	for _, want := range []string{"batch.gradient_accumulation: 2 → 4   (the same samples per step, in the same order)",
		"resumed from global_step4"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the resumed run's log does not say %q:\n%s", want, log.String())
		}
	}
	a, b := readSteps(t, filepath.Join(whole, "metrics.jsonl")), readSteps(t, filepath.Join(resumed, "metrics.jsonl"))
	if len(a) != steps || len(b) != steps {
		t.Fatalf("%d and %d step lines, want %d each", len(a), len(b), steps)
	}
	for i := range steps {
		for _, c := range []struct {
			what string
			x, y float64
		}{{"loss", a[i].Loss, b[i].Loss}, {"grad norm", a[i].GradNorm, b[i].GradNorm}, {"lr", a[i].LR, b[i].LR}} {
			if math.Abs(c.x-c.y) > 1e-5*math.Abs(c.x) {
				t.Errorf("step %d %s: uninterrupted %.8g, resumed on another layout %.8g", i+1, c.what, c.x, c.y)
			}
		}
	}
	_, pa, err := model.LoadSnapshot(whole)
	if err != nil {
		t.Fatal(err)
	}
	_, pb, err := model.LoadSnapshot(resumed)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range pa {
		worst = max(worst, math.Abs(float64(pa[i])-float64(pb[i])))
	}
	// Two uninterrupted runs on these two layouts differ by about 2e-4:
	// float32 sums in another order, which AdamW's normalisation enlarges
	// where a gradient is tiny. Other samples in a step would move the
	// losses above by far more than their 1e-5.
	if worst > 1e-3 {
		t.Errorf("final weights differ by up to %.3g", worst)
	}
}

// A new batch layout that reads other samples per step still needs
// --allow-config-change, and the refusal says why: shuffling permutes
// groups whose size is the layout's, and a shard whose tail one layout
// reads and the other drops puts other samples in the steps after it.
func TestResumeOnAnotherBatchLayoutRefusedWhenTheOrderDiffers(t *testing.T) {
	f := loadFamilyFixture(t, "qwen2_bias")
	for _, c := range []struct {
		name    string
		tokens  int
		shuffle bool
		why     string
	}{
		{"shuffle", 8*8*8 + 1, true, "shuffling permutes groups of B·T·N tokens, 32 in the checkpoint's run and 16 in this one"},
		// 528 targets: 16 groups of 32 tokens read 512 of them, 33 groups of 16 all 528.
		{"shard-tail", 528 + 1, false, "train_000000.bin (529 tokens)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.tokens = randomTokens(c.tokens, f.model.V)
			shuffle := func(o *trainer.Options) { o.Shuffle = c.shuffle }
			dir := t.TempDir()
			f.runIn(t, dir, 2, 2, layout(2, 2, 3), shuffle)
			_, err := f.runErr(t, dir, 1, 4, layout(2, 4, 0), func(o *trainer.Options) { shuffle(o); o.Resume = "auto" })
			for _, want := range []string{"batch.gradient_accumulation 2 → 4", c.why, "--allow-config-change"} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("resume: %v, want an error saying %q", err, want)
				}
			}
			if _, err := f.runErr(t, dir, 1, 4, layout(2, 4, 0), func(o *trainer.Options) {
				shuffle(o)
				o.Resume, o.AllowConfigChange = "auto", true
			}); err != nil {
				t.Errorf("resume with AllowConfigChange: %v", err)
			}
		})
	}
}
