package config

import (
	"bytes"
	"strings"
	"testing"
)

// TestLRSchedulerTypeFillsAMissingBlock: with no scheduler block,
// lr_scheduler_type builds Hugging Face's schedule over the run's steps with
// the warmup get_warmup_steps gives (⌈T × ratio⌉ unless warmup steps are
// given), says so in a note, and records the values as resolved keys.
func TestLRSchedulerTypeFillsAMissingBlock(t *testing.T) {
	const src = `{"train_micro_batch_size_per_gpu": 2}`
	c := mustParse(t, src, Overrides{LRScheduler: "cosine", WarmupRatio: Some(0.1), TotalSteps: Some(25)})
	s := c.Scheduler
	if s == nil || !s.HF || s.Type != "cosine" || s.Params.WarmupNumSteps != 3 || s.Params.TotalNumSteps != 25 {
		t.Fatalf("scheduler %+v, want HF cosine with 3 warmup steps (⌈25 × 0.1⌉) of 25", s)
	}
	w := warnAt(c.Warnings, "scheduler")
	if w == nil || !w.Note || !strings.HasPrefix(w.String(), "note: ") || !strings.Contains(w.Msg, "half cosine") {
		t.Errorf("note: %+v", w)
	}
	vals := map[string]string{}
	for _, kv := range c.Values() {
		vals[kv.Path] = kv.Value
	}
	if vals["scheduler.type"] != "cosine" || vals["scheduler.params.warmup_num_steps"] != "3" || vals["scheduler.params.total_num_steps"] != "25" {
		t.Errorf("resolved keys %v", vals)
	}
	var out bytes.Buffer
	if err := Explain(&out, c, 1, 0); err != nil || !strings.Contains(out.String(), "type ....") || !strings.Contains(out.String(), "cosine") {
		t.Errorf("explain: %v\n%s", err, out.String())
	}

	// Given warmup steps win over the ratio, as in TrainingArguments.
	c = mustParse(t, src, Overrides{LRScheduler: "linear", WarmupSteps: Some(7), WarmupRatio: Some(0.5), TotalSteps: Some(20)})
	if c.Scheduler.Params.WarmupNumSteps != 7 {
		t.Errorf("warmup %d, want --warmup-steps' 7", c.Scheduler.Params.WarmupNumSteps)
	}
	// "constant" has no warmup in get_scheduler.
	c = mustParse(t, src, Overrides{LRScheduler: "constant", WarmupSteps: Some(7), TotalSteps: Some(20)})
	if c.Scheduler.Params.WarmupNumSteps != 0 {
		t.Errorf("constant: warmup %d", c.Scheduler.Params.WarmupNumSteps)
	}
	// Without a flag, no block stays no schedule.
	if c := mustParse(t, src, Overrides{TotalSteps: Some(20)}); c.Scheduler != nil {
		t.Errorf("no flag: scheduler %+v", c.Scheduler)
	}
}

func TestLRSchedulerTypeRefusals(t *testing.T) {
	for _, tc := range []struct {
		src, name, path string
		want            []string
	}{
		{`{"train_micro_batch_size_per_gpu": 2, "scheduler": {"type": "WarmupLR"}}`, "linear", "scheduler",
			[]string{"WarmupLR", "no effect", "remove the scheduler block"}},
		{`{"train_micro_batch_size_per_gpu": 2}`, "cosin", "", []string{"did you mean cosine"}},
		{`{"train_micro_batch_size_per_gpu": 2}`, "polynomial", "", []string{"not one gotrain implements", "linear, cosine"}},
	} {
		_, es := parseCfg(t, tc.src, Options{Strict: true, Overrides: Overrides{LRScheduler: tc.name, TotalSteps: Some(10)}})
		e := errAt(es, tc.path)
		if e == nil {
			t.Errorf("%s: no error at %q: %v", tc.name, tc.path, es)
			continue
		}
		containsAll(t, tc.name+" error", e.Error(), tc.want...)
	}
}

// TestWarmupRatioFillsAutoWarmup: warmup_ratio fills "auto" warmup_num_steps
// of a DeepSpeed scheduler block with Python's math.ceil(T * ratio), float
// rounding included: 100 × 0.07 is 7.000000000000001 in binary floating
// point, so Hugging Face warms up for 8 steps.
func TestWarmupRatioFillsAutoWarmup(t *testing.T) {
	const src = `{"train_micro_batch_size_per_gpu": 2, "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": "auto", "total_num_steps": "auto"}}}`
	c := mustParse(t, src, Overrides{WarmupRatio: Some(0.07), TotalSteps: Some(100)})
	if got := c.Scheduler.Params.WarmupNumSteps; got != 8 {
		t.Errorf("warmup_num_steps %d, want 8", got)
	}
	_, es := parseCfg(t, src, Options{Strict: true, Overrides: Overrides{WarmupRatio: Some(1.5), TotalSteps: Some(100)}})
	if len(es) == 0 || !strings.Contains(es.Error(), "[0,1]") {
		t.Errorf("warmup ratio 1.5: %v", es)
	}
	// A file value that disagrees with the ratio is Hugging Face's mismatch error.
	_, es = parseCfg(t, strings.Replace(src, `"warmup_num_steps": "auto"`, `"warmup_num_steps": 5`, 1),
		Options{Strict: true, Overrides: Overrides{WarmupRatio: Some(0.07), TotalSteps: Some(100)}})
	if e := errAt(es, "scheduler.params.warmup_num_steps"); e == nil || !strings.Contains(e.Msg, "8") {
		t.Errorf("mismatch: %v", es)
	}
}

// TestExplainNonDefault: with NonDefault, explain leaves out the keys at
// DeepSpeed's defaults and the blocks holding only those, and keeps the
// values written or filled.
func TestExplainNonDefault(t *testing.T) {
	c := mustParse(t, `{"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 1.0, "steps_per_print": 10,
		"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2, "overlap_comm": true}}`, Overrides{Precision: "bf16"})
	var all, changed bytes.Buffer
	if err := ExplainWith(&all, c, ExplainOptions{WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	if err := ExplainWith(&changed, c, ExplainOptions{WorldSize: 2, NonDefault: true}); err != nil {
		t.Fatal(err)
	}
	out := changed.String()
	for _, want := range []string{"gradient_clipping", "stage ", "enabled .", "auto: precision=bf16", "train_micro_batch_size_per_gpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("non-default explain lacks %q:\n%s", want, out)
		}
	}
	for _, gone := range []string{"wall_clock_breakdown", "tensorboard", "reduce_bucket_size", "prescale_gradients"} {
		if strings.Contains(out, gone) {
			t.Errorf("non-default explain shows %q:\n%s", gone, out)
		}
		if !strings.Contains(all.String(), gone) {
			t.Errorf("full explain lacks %q", gone)
		}
	}
	if !strings.Contains(out, "precision ") || !strings.Contains(out, "bf16 (fp32 master weights)  (auto: precision=bf16)") {
		t.Errorf("summary does not say where the precision came from:\n%s", out)
	}
}
