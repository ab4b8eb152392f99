package config

import (
	"strings"
	"testing"
)

// TestValidationErrors covers DeepSpeed's config-time errors (deepspeed-semantics §2) and gotrain's value
// checks. Each must name the file, the key path and a fix.
func TestValidationErrors(t *testing.T) {
	cases := []struct {
		name, body, path, msg string
	}{
		{"fp16 and bf16", `"fp16": {"enabled": true}, "bf16": {"enabled": true}`, "bf16.enabled", "bfloat16 and fp16 modes cannot be simultaneously enabled"},
		{"stage 4", `"zero_optimization": {"stage": 4}`, "zero_optimization.stage", "stage 4 does not exist"},
		{"partial offload below stage 3", `"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}`, "zero_optimization.offload_optimizer.ratio", "Partial offloading only supported for ZeRO Stage 3."},
		{"offload ratio range", `"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 1.5}}`, "zero_optimization.offload_optimizer.ratio", "between 0 and 1"},
		{"offload_param below stage 3", `"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}`, "zero_optimization.offload_param", "needs ZeRO stage 3"},
		{"offload device", `"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "CPU"}}`, "zero_optimization.offload_optimizer.device", `did you mean "cpu"`},
		{"nvme without path", `"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}`, "zero_optimization.offload_param.nvme_path", "nvme_path"},
		{"nvme optimizer below stage 3", `"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}`, "zero_optimization.offload_optimizer.device", "stage 3"},
		{"communication_data_type", `"communication_data_type": "fp8"`, "communication_data_type", `"fp8" is not one of`},
		{"grad_accum_dtype", `"data_types": {"grad_accum_dtype": "float32"}`, "data_types.grad_accum_dtype", "is not one of"},
		{"tag_validation", `"checkpoint": {"tag_validation": "Strict"}`, "checkpoint.tag_validation", "is not one of"},
		{"parallel_write not bool", `"checkpoint": {"parallel_write": {"pipeline_stage": "yes"}}`, "checkpoint.parallel_write.pipeline_stage", "true or false"},
		{"1-bit Adam with ZeRO", `"optimizer": {"type": "OneBitAdam"}, "zero_optimization": {"stage": 1}`, "optimizer.type", "not compatible with ZeRO"},
		{"amp with ZeRO", `"amp": {"enabled": true, "opt_level": "O1"}, "zero_optimization": {"stage": 2}`, "amp.enabled", "Amp and ZeRO are not currently compatible"},
		{"amp with bf16", `"amp": {"enabled": true}, "bf16": {"enabled": true}`, "amp.enabled", "cannot be combined"},
		{"fp16 master weights without stage 2", `"fp16": {"enabled": true, "fp16_master_weights_and_grads": true}, "zero_optimization": {"stage": 3}`, "fp16.fp16_master_weights_and_grads", "only supported with ZeRO Stage 2"},
		{"legacy_stage1", `"zero_optimization": {"stage": 1, "legacy_stage1": true}`, "zero_optimization.legacy_stage1", "no longer supported"},
		{"untested optimizer with ZeRO", `"optimizer": {"type": "Lamb"}, "zero_optimization": {"stage": 2}`, "optimizer.type", "untested ZeRO Optimizer"},
		{"max_grad_norm in params", `"optimizer": {"type": "AdamW", "params": {"max_grad_norm": 1.0}}`, "optimizer.params.max_grad_norm", "not supported as an optimizer parameter"},
		{"optimizer without type", `"optimizer": {"params": {"lr": 1e-4}}`, "optimizer.type", "no \"type\""},
		{"lr not positive", `"optimizer": {"type": "AdamW", "params": {"lr": 0}}`, "optimizer.params.lr", "greater than 0"},
		{"beta out of range", `"optimizer": {"type": "Adam", "params": {"betas": [0.9, 1.0]}}`, "optimizer.params.betas", "less than 1"},
		{"betas length", `"optimizer": {"type": "Adam", "params": {"betas": [0.9]}}`, "optimizer.params.betas", "exactly 2"},
		{"eps not positive", `"optimizer": {"type": "AdamW", "params": {"eps": 0}}`, "optimizer.params.eps", "greater than 0"},
		{"negative weight decay", `"optimizer": {"type": "AdamW", "params": {"weight_decay": -0.1}}`, "optimizer.params.weight_decay", "must not be negative"},
		{"OneCycle needs cycle_min_lr", `"scheduler": {"type": "OneCycle", "params": {"cycle_max_lr": 0.1}}`, "scheduler.params.cycle_min_lr", "requires cycle_min_lr"},
		{"OneCycle needs cycle_max_lr", `"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1}}`, "scheduler.params.cycle_max_lr", "requires cycle_max_lr"},
		{"warmup_type strict", `"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "linaer"}}`, "scheduler.params.warmup_type", `did you mean "linear"`},
		{"auto on a key Hugging Face does not fill", `"steps_per_print": "auto"`, "steps_per_print", `"auto" is not accepted here`},
		{"number as string", `"steps_per_print": "10"`, "steps_per_print", "write 10 without quotes"},
		{"bool as string", `"bf16": {"enabled": "true"}`, "bf16.enabled", "without quotes"},
		{"null for non-optional key", `"gradient_clipping": null`, "gradient_clipping", "null is not accepted"},
		{"block of wrong type", `"fp16": true`, "fp16", "expected an object"},
		{"negative clipping", `"gradient_clipping": -1`, "gradient_clipping", "must not be negative"},
		{"steps_per_print zero", `"steps_per_print": 0`, "steps_per_print", "greater than 0"},
		{"allgather bucket multiple of 2", `"zero_optimization": {"stage": 2, "allgather_bucket_size": 500000001}`, "zero_optimization.allgather_bucket_size", "multiple of 2"},
		{"elasticity with batch keys", `"elasticity": {"enabled": true, "max_train_batch_size": 2000}`, "elasticity.enabled", "chooses the batch sizes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := `{"train_micro_batch_size_per_gpu": 1, ` + tc.body + "}"
			_, es := parseCfg(t, src, Options{Strict: true})
			e := errAt(es, tc.path)
			if e == nil {
				t.Fatalf("no error at %s; got %v", tc.path, es)
			}
			if !strings.Contains(e.Msg, tc.msg) && !strings.Contains(e.Fix, tc.msg) {
				t.Errorf("error %q (fix %q) does not mention %q", e.Msg, e.Fix, tc.msg)
			}
			if e.File != testFile || e.Fix == "" {
				t.Errorf("error lacks file or fix: %+v", e)
			}
		})
	}
}

func TestValidConfigsAreAccepted(t *testing.T) {
	for _, body := range []string{
		`"checkpoint": {"tag_validation": "fail"}`, // case-insensitive
		`"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0.3}}`,
		`"optimizer": {"type": "Lamb"}, "zero_optimization": {"stage": 2}, "zero_allow_untested_optimizer": true`,
		`"optimizer": {"type": "OneBitAdam", "params": {"freeze_step": 400}}`,
		`"amp": {"enabled": false, "opt_level": "O2"}, "zero_optimization": {"stage": 2}`,
		`"zero_optimization": {"stage": 3, "overlap_comm": "auto", "offload_param": {"device": "cpu", "buffer_count": "auto"}}`,
		`"steps_per_print": null, "flops_profiler": {"enabled": false, "output_file": null}`,
		`"fp16": {"enabled": true, "fp16_master_weights_and_grads": true}, "zero_optimization": {"stage": 2}`,
		`"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_second_step_size": 500}}`,
		`"scheduler": {"type": "LRRangeTest", "params": {"lr_range_test_staircase": true}}`,
		`"scheduler": {"type": "StepLR", "params": {"step_size": 10, "gamma": 0.5}}`,
		`"optimizer": {"type": "SGD", "params": {"lr": 0.1, "momentum": 0.9, "nesterov": true}}`,
	} {
		c, es := parseCfg(t, `{"train_micro_batch_size_per_gpu": 1, `+body+"}", Options{Strict: true})
		if len(es) > 0 || c == nil {
			t.Errorf("%s: %v", body, es)
		}
	}
}

func TestAutoInStrictBlockMeansDefault(t *testing.T) {
	c := mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, "overlap_comm": "auto", "sub_group_size": "auto", "offload_param": {"device": "cpu", "buffer_count": "auto"}}}`, Overrides{})
	// overlap_comm: DeepSpeed's default None resolves to true for stage 3.
	if !c.ZeRO.OverlapComm || c.ZeRO.SubGroupSize != 1000000000 || c.ZeRO.OffloadParam.BufferCount != 5 {
		t.Errorf("got overlap_comm %v, sub_group_size %d, buffer_count %d", c.ZeRO.OverlapComm, c.ZeRO.SubGroupSize, c.ZeRO.OffloadParam.BufferCount)
	}
	if s, _ := c.Source("zero_optimization.sub_group_size"); s.Kind != FromAutoDropped {
		t.Errorf("sub_group_size source %v", s)
	}
}

func TestWarnings(t *testing.T) {
	cases := []struct{ name, body, path, msg string }{
		{"total below warmup", `"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 10, "warmup_num_steps": 100}}`, "scheduler.params.total_num_steps", "smaller than warmup_num_steps"},
		{"vocabulary size", `"vocabulary_size": 50257`, "vocabulary_size", "pad it to 50264"},
		{"offload with stage 0", `"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}`, "zero_optimization.offload_optimizer", "no effect"},
	}
	for _, tc := range cases {
		c := mustParse(t, `{"train_micro_batch_size_per_gpu": 1, `+tc.body+"}", Overrides{})
		w := warnAt(c.Warnings, tc.path)
		if w == nil || !strings.Contains(w.Msg+w.Fix, tc.msg) {
			t.Errorf("%s: got %v", tc.name, c.Warnings)
		}
	}
	// Lenient mode: an unknown warmup_type falls back to log, as DeepSpeed does.
	c, es := parseCfg(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "WarmupLR", "params": {"warmup_type": "cubic"}}}`, Options{})
	if es != nil || c.Scheduler.Params.WarmupType != "log" || warnAt(c.Warnings, "scheduler.params.warmup_type") == nil {
		t.Errorf("lenient warmup_type: %v %v", es, c.Warnings)
	}
}

// TestUnsupportedSingleWarning checks that every accepted-but-unimplemented setting ends up in one warning.
func TestUnsupportedSingleWarning(t *testing.T) {
	src := `{"train_micro_batch_size_per_gpu": 1,
	  "optimizer": {"type": "Lamb"},
	  "zero_allow_untested_optimizer": true,
	  "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/nvme"}, "zero_quantized_weights": true, "mics_shard_size": 8},
	  "wandb": {"enabled": true, "project": "x"},
	  "tensorboard": {"enabled": false, "output_path": "ignored-because-disabled"},
	  "pipeline": {"stages": 2},
	  "hybrid_engine": {"enabled": false},
	  "amp": {"enabled": false},
	  "activation_checkpointing": {"cpu_checkpointing": true},
	  "comms_logger": {"enabled": true}}`
	c := mustParse(t, src, Overrides{})
	var found []Warning
	for _, w := range c.Warnings {
		if strings.Contains(w.Msg, "not supported by gotrain") {
			found = append(found, w)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one unsupported-keys warning, got %v", c.Warnings)
	}
	want := []string{"optimizer.type=Lamb", "zero_optimization.offload_param.device=nvme", "zero_optimization.zero_quantized_weights=true",
		"zero_optimization.mics_shard_size=8", "wandb.enabled=true", "wandb.project=x", "pipeline",
		"comms_logger.enabled=true", "zero_optimization.offload_param.nvme_path=/nvme"}
	containsAll(t, "warning", found[0].Msg, want...)
	for _, not := range []string{"tensorboard", "hybrid_engine", "amp"} {
		if strings.Contains(found[0].Msg, not) {
			t.Errorf("disabled block %s listed: %s", not, found[0].Msg)
		}
	}
	if got := len(c.Unsupported()); got != len(want) {
		t.Errorf("Unsupported() = %v (%d), want %d entries", c.Unsupported(), got, len(want))
	}
}

func TestOptimizerSemantics(t *testing.T) {
	cases := []struct {
		body          string
		adamw, supp   bool
		lr, wd, beta2 float64
	}{
		// FusedAdam defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0, adam_w_mode true.
		{`{"type": "Adam"}`, true, true, 1e-3, 0, 0.999},
		{`{"type": "Adam", "params": {"adam_w_mode": false}}`, false, true, 1e-3, 0, 0.999},
		{`{"type": "AdamW", "params": {"adam_w_mode": false, "lr": 2e-4, "weight_decay": 0.1}}`, true, true, 2e-4, 0.1, 0.999},
		{`{"type": "Lion"}`, false, false, 1e-4, 0, 0.99},
	}
	for _, tc := range cases {
		c := mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "optimizer": `+tc.body+"}", Overrides{})
		o := c.Optimizer
		if o.AdamWMode != tc.adamw || o.Supported != tc.supp || o.LR != tc.lr || o.WeightDecay != tc.wd || o.Betas[1] != tc.beta2 {
			t.Errorf("%s: got %+v", tc.body, o)
		}
	}
}

func TestSchedulerDefaults(t *testing.T) {
	c := mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 500}}}`, Overrides{})
	p := c.Scheduler.Params
	// lr_schedules.py defaults: warmup_min_ratio 0, warmup_num_steps 1000, cos_min_ratio 1e-4, warmup_type log.
	if p.TotalNumSteps != 500 || p.WarmupMinRatio != 0 || p.WarmupNumSteps != 1000 || p.CosMinRatio != 0.0001 || p.WarmupType != "log" || p.LastBatchIteration != -1 {
		t.Errorf("WarmupCosineLR params = %+v", p)
	}
	c = mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.01, "cycle_max_lr": 0.1}}}`, Overrides{})
	p = c.Scheduler.Params
	if p.CycleFirstStepSize != 2000 || p.CycleSecondStepSize.Set || !p.CycleMomentum || p.CycleMinMom != 0.8 || p.CycleMaxMom != 0.9 || p.DecayStepSize != 0 {
		t.Errorf("OneCycle params = %+v", p)
	}
	// WarmupLR: warmup_min_lr 0, warmup_max_lr 0.001, warmup_num_steps 1000, log; LRRangeTest: min lr 1e-3, step
	// size 2000, step rate 1, no staircase.
	c = mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "WarmupLR"}}`, Overrides{})
	if p = c.Scheduler.Params; p.WarmupMinLR != 0 || p.WarmupMaxLR != 0.001 || p.WarmupNumSteps != 1000 || p.WarmupType != "log" {
		t.Errorf("WarmupLR params = %+v", p)
	}
	c = mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "LRRangeTest"}}`, Overrides{})
	if p = c.Scheduler.Params; p.LRRangeTestMinLR != 1e-3 || p.LRRangeTestStepSize != 2000 || p.LRRangeTestStepRate != 1 || p.LRRangeTestStaircase {
		t.Errorf("LRRangeTest params = %+v", p)
	}
	// Missing total_num_steps is filled from the run length when it is known, with a warning.
	c = mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "WarmupDecayLR"}}`, Overrides{TotalSteps: Some(321)})
	if c.Scheduler.Params.TotalNumSteps != 321 || warnAt(c.Warnings, "scheduler.params.total_num_steps") == nil {
		t.Errorf("total_num_steps from run: %+v %v", c.Scheduler.Params, c.Warnings)
	}
	// Without a run length (validate), the default one every command shares, and DeepSpeed's failure named.
	c = mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "scheduler": {"type": "WarmupDecayLR"}}`, Overrides{})
	if w := warnAt(c.Warnings, "scheduler.params.total_num_steps"); c.Scheduler.Params.TotalNumSteps != DefaultMaxSteps || w == nil ||
		!strings.Contains(w.Msg, "DeepSpeed itself would fail") {
		t.Errorf("total_num_steps without a run length: %+v %v", c.Scheduler.Params, c.Warnings)
	}
}

// TestDefaultsMatchDeepSpeedCode spot-checks the code defaults where DeepSpeed's docs differ (§1.13).
func TestDefaultsMatchDeepSpeedCode(t *testing.T) {
	c := mustParse(t, `{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {}}}`, Overrides{})
	z := c.ZeRO
	if c.GradientClipping != 0 || c.StepsPerPrint.Set || z.OverlapComm || z.Stage3PrefetchBucketSize != 5e7 ||
		z.SubGroupSize != 1e9 || z.Stage3ParamPersistenceThreshold != 1e5 || z.OffloadOptimizer.Device != "none" || z.OffloadOptimizer.NVMePath.Set {
		t.Errorf("defaults differ from DeepSpeed's code: clip %g, steps_per_print %v, %+v", c.GradientClipping, c.StepsPerPrint, z)
	}
	if c.FP16.InitialScalePower != 16 || c.FP16.LossScaleWindow != 1000 || c.FP16.Hysteresis != 2 || c.FP16.MinLossScale != 1 || c.FP16.LossScale != 0 {
		t.Errorf("fp16 defaults: %+v", c.FP16)
	}
	if !c.ZeroForceDSCPUOptimizer || c.ZeroAllowUntestedOptimizer || c.Checkpoint.TagValidation != "Warn" || c.FlopsProfiler.TopModules != 1 {
		t.Error("misc defaults differ")
	}
}

// TestEveryKeyHasATypedHome checks that building the typed Config reads every scalar key of the table, so no
// key is parsed and then dropped.
func TestEveryKeyHasATypedHome(t *testing.T) {
	d := newDecoder(testFile, Options{Strict: true})
	root, _ := parseTree(testFile, []byte(`{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW"}, "scheduler": {"type": "WarmupLR"},
	  "zero_optimization": {"offload_optimizer": {}, "offload_param": {}, "zeropp_loco_param": {}}}`))
	d.block("", root, false)
	d.resolveAutos()
	d.build()
	for _, s := range d.tab.specs {
		if s.kind == kindBlock || s.kind == kindParams {
			continue
		}
		if !d.read[s.path] {
			t.Errorf("key %s is decoded but never read into Config", s.path)
		}
	}
}
