package config

import (
	"math"
	"strings"
	"testing"
)

const autoConfig = `{
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "fp16": {"enabled": "auto"},
  "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto", "warmup_num_steps": "auto", "total_num_steps": "auto"}},
  "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}
}`

func TestAutoFromOverrides(t *testing.T) {
	ov := Overrides{
		MicroBatch: Some(2), GradAccum: Some(4), LR: Some(3e-4), Betas: Some([2]float64{0.9, 0.95}), Eps: Some(1e-6),
		WeightDecay: Some(0.1), MaxGradNorm: Some(0.5), WarmupSteps: Some(200), TotalSteps: Some(5000),
		Precision: "bf16", Hidden: 768,
	}
	c := mustParse(t, autoConfig, ov)
	if c.TrainMicroBatchSizePerGPU != Some(2) || c.GradientAccumulationSteps != Some(4) {
		t.Errorf("micro/gas = %v/%v, want 2/4", c.TrainMicroBatchSizePerGPU, c.GradientAccumulationSteps)
	}
	b, err := c.Resolve(8)
	if err != nil {
		t.Fatal(err)
	}
	// Hugging Face: train_batch_size = world_size × per_device_train_batch_size × gradient_accumulation_steps.
	if b.TrainBatchSize != 8*2*4 {
		t.Errorf("train_batch_size = %d, want %d", b.TrainBatchSize, 8*2*4)
	}
	if c.GradientClipping != 0.5 {
		t.Errorf("gradient_clipping = %g", c.GradientClipping)
	}
	o := c.Optimizer
	if o.LR != 3e-4 || o.Betas != [2]float64{0.9, 0.95} || o.Eps != 1e-6 || o.WeightDecay != 0.1 {
		t.Errorf("optimizer = %+v", o)
	}
	p := c.Scheduler.Params
	if p.WarmupMinLR != 0 || p.WarmupMaxLR != 3e-4 || p.WarmupNumSteps != 200 || p.TotalNumSteps != 5000 {
		t.Errorf("scheduler params = %+v", p)
	}
	if c.FP16.Enabled || !c.BF16.Enabled {
		t.Errorf("fp16/bf16 = %v/%v, want false/true", c.FP16.Enabled, c.BF16.Enabled)
	}
	h := int64(768)
	if c.ZeRO.ReduceBucketSize != h*h || c.ZeRO.Stage3PrefetchBucketSize != int64(math.Floor(0.9*float64(h*h))) ||
		c.ZeRO.Stage3ParamPersistenceThreshold != 10*h {
		t.Errorf("zero buckets = %d, %d, %d", c.ZeRO.ReduceBucketSize, c.ZeRO.Stage3PrefetchBucketSize, c.ZeRO.Stage3ParamPersistenceThreshold)
	}
	for _, path := range []string{"train_micro_batch_size_per_gpu", "optimizer.params.lr", "scheduler.params.warmup_max_lr", "bf16.enabled", "zero_optimization.reduce_bucket_size"} {
		if src, _ := c.Source(path); src.Kind != FromAutoOverride {
			t.Errorf("%s: source %v, want auto from override", path, src)
		}
	}
}

func TestAutoFromHuggingFaceDefaults(t *testing.T) {
	c := mustParse(t, autoConfig, Overrides{TotalSteps: Some(1000)})
	b, err := c.Resolve(4)
	if err != nil {
		t.Fatal(err)
	}
	// TrainingArguments defaults: per_device_train_batch_size 8, gradient_accumulation_steps 1.
	if b.MicroBatch != 8 || b.GradAccum != 1 || b.TrainBatchSize != 4*8*1 {
		t.Errorf("batch = %+v", b)
	}
	o := c.Optimizer
	if o.LR != 5e-5 || o.Betas != [2]float64{0.9, 0.999} || o.Eps != 1e-8 || o.WeightDecay != 0 {
		t.Errorf("optimizer = %+v", o)
	}
	if c.GradientClipping != 1.0 {
		t.Errorf("gradient_clipping = %g, want max_grad_norm default 1.0", c.GradientClipping)
	}
	p := c.Scheduler.Params
	if p.WarmupMaxLR != 5e-5 || p.WarmupNumSteps != 0 || p.TotalNumSteps != 1000 {
		t.Errorf("scheduler = %+v", p)
	}
	if c.FP16.Enabled || c.BF16.Enabled {
		t.Error("fp16/bf16 should default to false")
	}
	// No model width: the bucket keys fall back to DeepSpeed's code defaults.
	if c.ZeRO.ReduceBucketSize != 500000000 || c.ZeRO.Stage3PrefetchBucketSize != 50000000 || c.ZeRO.Stage3ParamPersistenceThreshold != 100000 {
		t.Errorf("zero buckets = %+v", c.ZeRO)
	}
	if src, _ := c.Source("optimizer.params.lr"); src.Kind != FromAutoHFDefault {
		t.Errorf("lr source = %v", src)
	}
	if src, _ := c.Source("zero_optimization.reduce_bucket_size"); src.Kind != FromRunTime || !strings.Contains(src.String(), "--model") {
		t.Errorf("reduce_bucket_size source = %v", src)
	}
}

// TestAutoTotalStepsFilledAtRunTime: without the run length (validate and explain without --max-steps),
// "auto" total_num_steps is no error: it is the run's, checked with the default run length every command
// shares, and says where the run takes it from.
func TestAutoTotalStepsFilledAtRunTime(t *testing.T) {
	c, es := parseCfg(t, autoConfig, Options{Strict: true})
	if e := errAt(es, "scheduler.params.total_num_steps"); e != nil {
		t.Fatalf("error for total_num_steps auto without the run length: %v", e)
	}
	src, _ := c.Source("scheduler.params.total_num_steps")
	if src.Kind != FromRunTime || src.String() != "auto → filled at run time from --max-steps (default 100)" {
		t.Errorf("source %q", src)
	}
	if c.Scheduler.Params.TotalNumSteps != DefaultMaxSteps {
		t.Errorf("checked with %d steps, want the default run length %d", c.Scheduler.Params.TotalNumSteps, DefaultMaxSteps)
	}
}

func TestAutoMismatch(t *testing.T) {
	cases := []struct {
		name, src, path string
		ov              Overrides
	}{
		{"micro", `{"train_micro_batch_size_per_gpu": 4}`, "train_micro_batch_size_per_gpu", Overrides{MicroBatch: Some(8)}},
		{"gas", `{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}`, "gradient_accumulation_steps", Overrides{GradAccum: Some(3)}},
		{"clip", `{"train_micro_batch_size_per_gpu": 4, "gradient_clipping": 1.0}`, "gradient_clipping", Overrides{MaxGradNorm: Some(0.3)}},
		{"lr", `{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}`, "optimizer.params.lr", Overrides{LR: Some(3e-4)}},
		{"betas", `{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"betas": [0.9, 0.999]}}}`, "optimizer.params.betas", Overrides{Betas: Some([2]float64{0.9, 0.95})}},
		{"warmup_max_lr", `{"train_micro_batch_size_per_gpu": 4, "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 1e-3}}}`, "scheduler.params.warmup_max_lr", Overrides{LR: Some(3e-4)}},
		{"bf16 vs fp16 flag", `{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}}`, "bf16.enabled", Overrides{Precision: "fp16"}},
		{"train_batch_size", `{"train_batch_size": 64, "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}`, "train_batch_size", Overrides{MicroBatch: Some(4), GradAccum: Some(2), WorldSize: 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, es := parseCfg(t, tc.src, Options{Strict: true, Overrides: tc.ov})
			e := errAt(es, tc.path)
			if e == nil {
				t.Fatalf("no mismatch error at %s: %v", tc.path, es)
			}
			containsAll(t, "message", e.Msg, "command line", "mismatch")
			containsAll(t, "fix", e.Fix, `"auto"`)
			if e.Line == 0 {
				t.Error("mismatch error has no position")
			}
		})
	}
	// Equal values written differently agree.
	mustParse(t, `{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 0.0003}}}`, Overrides{LR: Some(3e-4)})
}

func TestOverrideWithoutEffectWarns(t *testing.T) {
	c := mustParse(t, `{"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}}`,
		Overrides{WarmupSteps: Some(10), Precision: "bf16"})
	found := 0
	for _, w := range c.Warnings {
		if w.Path == "" && (strings.Contains(w.Msg, "warmup steps") || strings.Contains(w.Msg, "precision")) {
			found++
		}
	}
	if found != 2 {
		t.Errorf("want 2 no-effect warnings (warmup steps, precision), got %v", c.Warnings)
	}
}

func TestNoOptimizerBlockUsesOverrides(t *testing.T) {
	c := mustParse(t, `{"train_micro_batch_size_per_gpu": 4}`, Overrides{LR: Some(1e-3), WeightDecay: Some(0.05)})
	o := c.Optimizer
	if !o.Default || !o.Supported || !o.AdamWMode || o.LR != 1e-3 || o.WeightDecay != 0.05 || o.Betas != [2]float64{0.9, 0.999} || o.Eps != 1e-8 {
		t.Errorf("default optimizer = %+v", o)
	}
	for _, w := range c.Warnings {
		if strings.Contains(w.Msg, "no effect") {
			t.Errorf("unexpected no-effect warning: %v", w)
		}
	}
}

func TestInvalidPrecisionOverride(t *testing.T) {
	_, es := parseCfg(t, `{"train_micro_batch_size_per_gpu": 1}`, Options{Strict: true, Overrides: Overrides{Precision: "fp8"}})
	if len(es) != 1 || !strings.Contains(es[0].Msg, "fp8") {
		t.Errorf("got %v", es)
	}
}
