package config

import "strings"

// paramSpec is one optimizer or scheduler parameter. Paths are relative to "optimizer.params" or
// "scheduler.params"; the table for a block depends on its "type".
type paramSpec struct {
	keySpec
	required bool // DeepSpeed fails without it (a positional constructor argument)
}

func pb(name string, def any) paramSpec { return paramSpec{keySpec: kb(name, def, Supported, "")} }
func pi(name string, def any, r valueRange) paramSpec {
	return paramSpec{keySpec: ki(name, def, Supported, "").in(r)}
}
func pf(name string, def any, r valueRange) paramSpec {
	return paramSpec{keySpec: kf(name, def, Supported, "").in(r)}
}
func ps(name string, def any, vals ...string) paramSpec {
	s := ks(name, def, Supported, "")
	if len(vals) > 0 {
		s = s.oneOf(false, vals...)
	}
	return paramSpec{keySpec: s}
}
func pl(name string, def []float64, r valueRange) paramSpec {
	s := keySpec{path: name, kind: kindFloatList, status: Supported, rng: r}
	if def != nil {
		s.def = def // a nil slice must stay an untyped nil: None
	}
	return paramSpec{keySpec: s}
}
func (p paramSpec) hfMap(h hfKey) paramSpec     { p.hf = h; return p }
func (p paramSpec) need() paramSpec             { p.required = true; return p }
func (p paramSpec) state(s Status) paramSpec    { p.status = s; return p }
func (p paramSpec) about(note string) paramSpec { p.note = note; return p }

// dsOptimizerNames lists the names DeepSpeed lower-cases and builds itself (DEEPSPEED_OPTIMIZERS); display spelling
// is used in messages.
func dsOptimizerNames() []string {
	return []string{"Adagrad", "Adam", "AdamW", "Lamb", "OneBitAdam", "ZeroOneAdam", "OneBitLamb", "MuAdam", "MuAdamW", "MuSGD", "Lion"}
}

// torchOptimizerNames lists torch.optim classes; DeepSpeed looks any other type up there, case-sensitively.
func torchOptimizerNames() []string {
	return []string{"Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "SparseAdam", "Adamax", "ASGD", "LBFGS", "NAdam", "RAdam", "RMSprop", "Rprop", "SGD"}
}

// dsSchedulerNames lists DeepSpeed's own schedulers (lr_schedules.py); gotrain implements all of them.
func dsSchedulerNames() []string {
	return []string{"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"}
}

// torchSchedulerNames lists torch.optim.lr_scheduler classes DeepSpeed falls back to.
func torchSchedulerNames() []string {
	return []string{"LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR", "LinearLR", "ExponentialLR",
		"SequentialLR", "CosineAnnealingLR", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts",
		"OneCycleLR", "PolynomialLR"}
}

// optimizerKind classifies an optimizer "type" the way DeepSpeed's engine does (§1.2): names in
// DEEPSPEED_OPTIMIZERS match case-insensitively and are lower-cased; anything else must be a torch.optim class
// name, case-sensitively.
func optimizerKind(typ string) (canonical string, torch, ok bool) {
	lower := strings.ToLower(typ)
	for _, n := range dsOptimizerNames() {
		if strings.ToLower(n) == lower {
			return lower, false, true
		}
	}
	for _, n := range torchOptimizerNames() {
		if n == typ {
			return typ, true, true
		}
	}
	return "", false, false
}

func adamBetas() []float64 { return []float64{0.9, 0.999} }

// optimizerParams returns the parameter table for a canonical optimizer type (see optimizerKind).
// Defaults are those of the classes DeepSpeed builds (FusedAdam, FusedLamb, torch Adagrad, FusedLion, ...).
func optimizerParams(canonical string, torch bool) []paramSpec {
	lr := func(def float64) paramSpec { return pf("lr", def, positive).hfMap(hfLR) }
	betas := func(def []float64) paramSpec { return pl("betas", def, unitOpen).hfMap(hfBetas) }
	eps := func(def float64) paramSpec { return pf("eps", def, positive).hfMap(hfEps) }
	wd := pf("weight_decay", 0.0, nonNegative).hfMap(hfWeightDecay)
	if torch {
		return torchOptimizerParams()
	}
	switch canonical {
	case "adam", "adamw":
		return []paramSpec{
			lr(1e-3), betas(adamBetas()), eps(1e-8), wd,
			pb("bias_correction", true).state(NotSupported).about("false is not supported"),
			pb("adam_w_mode", true).about("Adam with true (the default) is AdamW"),
			pb("torch_adam", false).state(Ignored).about("selects an implementation, not the math"),
			pb("amsgrad", false).state(NotSupported),
			pb("set_grad_none", true).state(Ignored),
		}
	case "lamb":
		return []paramSpec{lr(1e-3), pb("bias_correction", true), betas(adamBetas()), eps(1e-8), pb("eps_inside_sqrt", false), wd,
			pf("max_coeff", 10.0, positive), pf("min_coeff", 0.01, nonNegative), pb("amsgrad", false)}
	case "adagrad":
		return []paramSpec{lr(1e-2), pf("lr_decay", 0.0, nonNegative), wd, pf("initial_accumulator_value", 0.0, nonNegative), eps(1e-10), pb("amsgrad", false)}
	case "lion":
		return []paramSpec{lr(1e-4), betas([]float64{0.9, 0.99}), wd}
	case "onebitadam":
		return []paramSpec{lr(1e-3), pi("freeze_step", 100000.0, nonNegative), pb("bias_correction", true), betas(adamBetas()), eps(1e-8),
			pb("eps_inside_sqrt", false), wd, pb("amsgrad", false), pb("cuda_aware", false), ps("comm_backend_name", "nccl")}
	case "zerooneadam":
		return []paramSpec{lr(1e-3), pb("bias_correction", true), betas(adamBetas()), eps(1e-8), pb("eps_inside_sqrt", false), wd,
			pb("amsgrad", false), pb("cuda_aware", false), ps("comm_backend_name", "nccl"), pi("var_freeze_step", 100000.0, nonNegative),
			pi("var_update_scaler", 16.0, positive), pi("local_step_scaler", 32678.0, positive), pi("local_step_clipper", 16.0, positive)}
	case "onebitlamb":
		return []paramSpec{lr(1e-3), pi("freeze_step", 100000.0, nonNegative), pb("bias_correction", true), betas(adamBetas()), eps(1e-8),
			pb("eps_inside_sqrt", false), wd, pf("max_coeff", 10.0, positive), pf("min_coeff", 0.01, nonNegative), pb("amsgrad", false),
			pb("cuda_aware", false), ps("comm_backend_name", "nccl"), pf("coeff_beta", 0.9, unitClosed), pf("factor_max", 4.0, positive),
			pf("factor_min", 0.5, positive), pf("factor_threshold", 0.1, nonNegative)}
	case "muadam", "muadamw":
		return []paramSpec{lr(1e-3), betas(adamBetas()), eps(1e-8), wd, pb("amsgrad", false)}
	case "musgd":
		return []paramSpec{lr(1e-3), pf("momentum", 0.0, nonNegative), pf("dampening", 0.0, nonNegative), wd, pb("nesterov", false)}
	}
	return nil
}

// torchOptimizerParams is the union of the keyword arguments of the torch.optim classes DeepSpeed may build.
// A per-class table would track torch releases; the union still catches misspellings, and gotrain does not run
// these optimizers.
func torchOptimizerParams() []paramSpec {
	var out []paramSpec
	for _, n := range []string{"lr", "eps", "weight_decay", "momentum", "dampening", "alpha", "rho", "lr_decay",
		"initial_accumulator_value", "momentum_decay", "lambd", "t0", "tolerance_grad", "tolerance_change", "beta2_decay", "d"} {
		s := pf(n, nil, anyValue)
		switch n {
		case "lr":
			s = s.hfMap(hfLR)
			s.rng = positive
		case "eps":
			s = s.hfMap(hfEps)
		case "weight_decay":
			s = s.hfMap(hfWeightDecay)
			s.rng = nonNegative
		}
		out = append(out, s)
	}
	for _, n := range []string{"nesterov", "centered", "amsgrad", "maximize", "foreach", "capturable", "differentiable", "fused", "decoupled_weight_decay"} {
		out = append(out, pb(n, nil))
	}
	out = append(out, pl("betas", nil, unitOpen).hfMap(hfBetas), pl("etas", nil, anyValue), pl("step_sizes", nil, anyValue),
		pi("max_iter", nil, positive), pi("max_eval", nil, positive), pi("history_size", nil, positive), ps("line_search_fn", nil))
	return out
}

// schedulerParams returns the parameter table for a DeepSpeed scheduler type, or nil for torch schedulers,
// whose keyword arguments are passed through unchecked.
func schedulerParams(typ string) []paramSpec {
	last := pi("last_batch_iteration", -1.0, anyValue).state(Ignored).about("resumes come from the checkpoint")
	warmupType := ps("warmup_type", "log", "log", "linear")
	switch typ {
	case "WarmupLR", "WarmupDecayLR":
		list := []paramSpec{
			pf("warmup_min_lr", 0.0, nonNegative).hfMap(hfWarmupMinLR),
			pf("warmup_max_lr", 0.001, nonNegative).hfMap(hfWarmupMaxLR),
			pi("warmup_num_steps", 1000.0, nonNegative).hfMap(hfWarmupSteps),
			warmupType, last,
		}
		if typ == "WarmupDecayLR" {
			list = append([]paramSpec{pi("total_num_steps", nil, positive).hfMap(hfTotalSteps).need()}, list...)
		}
		return list
	case "WarmupCosineLR":
		return []paramSpec{
			pi("total_num_steps", nil, positive).hfMap(hfTotalSteps).need(),
			pf("warmup_min_ratio", 0.0, unitClosed),
			pi("warmup_num_steps", 1000.0, nonNegative).hfMap(hfWarmupSteps),
			pf("cos_min_ratio", 0.0001, unitClosed),
			warmupType, last,
		}
	case "OneCycle":
		return []paramSpec{
			pf("cycle_min_lr", nil, nonNegative).need(),
			pf("cycle_max_lr", nil, nonNegative).need(),
			pf("decay_lr_rate", 0.0, nonNegative),
			pi("cycle_first_step_size", 2000.0, positive),
			pi("cycle_second_step_size", nil, positive),
			pi("cycle_first_stair_count", 0.0, nonNegative).state(Ignored).about("accepted but unused by DeepSpeed"),
			pi("cycle_second_stair_count", nil, nonNegative).state(Ignored).about("accepted but unused by DeepSpeed"),
			pi("decay_step_size", 0.0, nonNegative),
			pb("cycle_momentum", true),
			pf("cycle_min_mom", 0.8, unitOpen),
			pf("cycle_max_mom", 0.9, unitOpen),
			pf("decay_mom_rate", 0.0, nonNegative),
			last,
		}
	case "LRRangeTest":
		return []paramSpec{
			pf("lr_range_test_min_lr", 1e-3, nonNegative),
			pi("lr_range_test_step_size", 2000.0, positive),
			pf("lr_range_test_step_rate", 1.0, nonNegative),
			pb("lr_range_test_staircase", false),
			last,
		}
	}
	return nil
}

func isDSScheduler(typ string) bool {
	for _, n := range dsSchedulerNames() {
		if n == typ {
			return true
		}
	}
	return false
}

func isTorchScheduler(typ string) bool {
	for _, n := range torchSchedulerNames() {
		if n == typ {
			return true
		}
	}
	return false
}
