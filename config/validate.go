package config

import (
	"fmt"
	"strings"
)

// zeroOptimizers lists the optimizer types DeepSpeed's ZeRO whitelist accepts without
// zero_allow_untested_optimizer (deepspeed-semantics §1.2): Adam, AdamW, Adagrad and Lion in their DeepSpeed and
// torch forms.
func zeroOptimizers() []string { return []string{"adam", "adamw", "adagrad", "lion"} }

// oneBitOptimizers lists the optimizers that use compressed communication and assert that ZeRO is off.
func oneBitOptimizers() []string { return []string{"onebitadam", "zerooneadam", "onebitlamb"} }

// validate applies DeepSpeed's cross-key checks (deepspeed-semantics §2) to the typed config.
func (d *decoder) validate(c *Config) {
	at := func(path string) (int, int) {
		if e := d.ents[path]; e != nil && e.given {
			return e.line, e.col
		}
		return 0, 0
	}
	fail := func(path, msg, fix string) {
		line, col := at(path)
		d.errAt(line, col, path, msg, fix)
	}
	warn := func(path, msg, fix string) {
		line, col := at(path)
		d.warnAt(line, col, path, msg, fix)
	}
	z := c.ZeRO

	if c.FP16.Enabled && c.BF16.Enabled {
		fail("bf16.enabled", "bfloat16 and fp16 modes cannot be simultaneously enabled", "set \"enabled\": false in either fp16 or bf16")
	}
	if d.ents["zero_optimization.stage"] != nil && d.ents["zero_optimization.stage"].v != nil && (z.Stage < 0 || z.Stage > 3) {
		fail("zero_optimization.stage", fmt.Sprintf("ZeRO stage %d does not exist; stages are 0, 1, 2 and 3", z.Stage), "use 0 (off), 1, 2 or 3")
	}
	if z.LegacyStage1 {
		fail("zero_optimization.legacy_stage1", "legacy_stage1 is no longer supported (DeepSpeed raises)", "remove it; stage 1 is the same algorithm")
	}
	if oo := z.OffloadOptimizer; oo != nil {
		if oo.Ratio < 1 && z.Stage != 3 {
			fail("zero_optimization.offload_optimizer.ratio", "Partial offloading only supported for ZeRO Stage 3.", "set \"stage\": 3, or remove ratio to offload everything")
		}
		if oo.Device == "nvme" && z.Stage != 3 {
			fail("zero_optimization.offload_optimizer.device", "NVMe optimizer offload needs ZeRO stage 3", "use \"device\": \"cpu\", or set \"stage\": 3")
		}
		if oo.Device == "nvme" && !oo.NVMePath.Set {
			fail("zero_optimization.offload_optimizer.nvme_path", "NVMe offload needs nvme_path", "add \"nvme_path\": \"<directory on a local NVMe drive>\"")
		}
		if oo.Device != "none" && z.Stage == 0 {
			warn("zero_optimization.offload_optimizer", "optimizer offload has no effect with ZeRO stage 0", "set \"stage\" to 1, 2 or 3, or remove offload_optimizer")
		}
	}
	if op := z.OffloadParam; op != nil {
		if op.Device != "none" && z.Stage != 3 {
			fail("zero_optimization.offload_param", fmt.Sprintf("parameter offload needs ZeRO stage 3, but stage is %d", z.Stage),
				"set \"stage\": 3, or remove offload_param (use offload_optimizer for stages 1 and 2)")
		}
		if op.Device == "nvme" && !op.NVMePath.Set {
			fail("zero_optimization.offload_param.nvme_path", "NVMe offload needs nvme_path", "add \"nvme_path\": \"<directory on a local NVMe drive>\"")
		}
	}
	if (z.Stage == 1 || z.Stage == 2) && z.AllgatherBucketSize%2 != 0 {
		fail("zero_optimization.allgather_bucket_size", fmt.Sprintf("allgather_bucket_size %d must be a multiple of 2 for stages 1 and 2", z.AllgatherBucketSize),
			fmt.Sprintf("use %d", z.AllgatherBucketSize+1))
	}
	if c.FP16.FP16MasterWeightsAndGrads && z.Stage != 2 {
		fail("fp16.fp16_master_weights_and_grads", "Fp16_master_weights_and_grads is only supported with ZeRO Stage 2 for now.", "set \"stage\": 2, or remove the key")
	}
	if z.MicsShardSize == 0 || z.MicsShardSize < -1 {
		fail("zero_optimization.mics_shard_size", fmt.Sprintf("mics_shard_size must be -1 (off) or positive, got %d", z.MicsShardSize), "use -1")
	}

	if c.AMP.Enabled {
		if z.Stage > 0 {
			fail("amp.enabled", "Amp and ZeRO are not currently compatible", "remove the amp block and use bf16 or fp16 with ZeRO")
		}
		if c.FP16.Enabled || c.BF16.Enabled {
			fail("amp.enabled", "amp cannot be combined with fp16 or bf16", "enable only one of amp, fp16 and bf16")
		}
	}

	o := c.Optimizer
	if !o.Default && o.Type != "" {
		if containsString(oneBitOptimizers(), o.Type) && z.Stage > 0 {
			fail("optimizer.type", fmt.Sprintf("%s is not compatible with ZeRO (1-bit optimizers compress their own communication)", o.Written),
				"set \"stage\": 0, or use \"AdamW\"")
		}
		if z.Stage > 0 && !c.ZeroAllowUntestedOptimizer && !containsString(zeroOptimizers(), strings.ToLower(o.Type)) &&
			!containsString(oneBitOptimizers(), o.Type) {
			fail("optimizer.type", fmt.Sprintf("You are using an untested ZeRO Optimizer (%s)", o.Written),
				"add \"zero_allow_untested_optimizer\": true, or use \"AdamW\"")
		}
	}
	if s := c.Scheduler; s != nil && s.Supported {
		p := s.Params
		if (s.Type == "WarmupDecayLR" || s.Type == "WarmupCosineLR") && p.TotalNumSteps > 0 && p.TotalNumSteps < p.WarmupNumSteps {
			warn("scheduler.params.total_num_steps", fmt.Sprintf("total_num_steps %d is smaller than warmup_num_steps %d: the run ends inside the warmup", p.TotalNumSteps, p.WarmupNumSteps),
				"raise total_num_steps or lower warmup_num_steps")
		}
		if s.Type == "OneCycle" && p.CycleMaxLR < p.CycleMinLR {
			warn("scheduler.params.cycle_max_lr", fmt.Sprintf("cycle_max_lr %g is below cycle_min_lr %g", p.CycleMaxLR, p.CycleMinLR), "swap the two values")
		}
		if (s.Type == "WarmupLR" || s.Type == "WarmupDecayLR") && p.WarmupMaxLR < p.WarmupMinLR {
			warn("scheduler.params.warmup_max_lr", fmt.Sprintf("warmup_max_lr %g is below warmup_min_lr %g: the rate decreases during warmup", p.WarmupMaxLR, p.WarmupMinLR), "swap the two values")
		}
	}
	if b, ok := o.Params["betas"].([]float64); ok && !o.Default && len(b) != 2 {
		fail("optimizer.params.betas", fmt.Sprintf("betas needs exactly 2 values, got %d", len(b)), "write e.g. [0.9, 0.999]")
	}
	if n, ok := c.VocabularySize.Get(); ok && n%8 != 0 {
		warn("vocabulary_size", fmt.Sprintf("vocabulary_size %d is not a multiple of 8, which slows tensor-core matmuls", n),
			fmt.Sprintf("pad it to %d", (n+7)/8*8))
	}
	d.validateElasticity(c)
	d.validateCurriculum(c.Curriculum, fail)
}

// validateElasticity applies DeepSpeed's one elasticity check: the elastic scheduler chooses the batch sizes,
// so explicit batch keys conflict unless ignore_non_elastic_batch_info is set.
func (d *decoder) validateElasticity(c *Config) {
	e := d.ents["elasticity"]
	if e == nil {
		return
	}
	n, _ := e.v.(*node)
	if n == nil || n.kind != nodeObject {
		return
	}
	en := n.get("enabled")
	if en == nil || en.kind != nodeBool || !en.b {
		return
	}
	if ig := n.get("ignore_non_elastic_batch_info"); ig != nil && ig.kind == nodeBool && ig.b {
		return
	}
	var given []string
	for _, k := range []string{keyTBS, keyMicro, keyGAS} {
		if d.given(k) {
			given = append(given, k)
		}
	}
	if len(given) > 0 {
		d.errNode(en, "elasticity.enabled", "elasticity chooses the batch sizes itself, but the file also sets "+strings.Join(given, ", "),
			"remove those keys, or add \"ignore_non_elastic_batch_info\": true to the elasticity block")
	}
}
