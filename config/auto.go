package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Overrides are the values gotrain's train flags provide, in the role Hugging Face TrainingArguments play for
// "auto" keys (deepspeed-semantics §1.1). An Opt that is not Set means "flag not given".
//
// Rules: a key written as "auto" takes the override, or the Hugging Face default when the flag is not given.
// A key written with a value that differs from a given override is an error (Hugging Face's mismatch error).
// A key absent from the file keeps DeepSpeed's behaviour; a flag that then has no effect is reported as a
// warning. With no optimizer block at all, gotrain trains with AdamW built from these values, as the Hugging
// Face Trainer builds its own optimizer.
type Overrides struct {
	MicroBatch  Opt[int]        // per_device_train_batch_size → train_micro_batch_size_per_gpu
	GradAccum   Opt[int]        // gradient_accumulation_steps
	LR          Opt[float64]    // learning_rate → optimizer.params.lr, scheduler.params.warmup_max_lr
	Betas       Opt[[2]float64] // (adam_beta1, adam_beta2) → optimizer.params.betas
	Eps         Opt[float64]    // adam_epsilon → optimizer.params.eps
	WeightDecay Opt[float64]    // weight_decay → optimizer.params.weight_decay
	MaxGradNorm Opt[float64]    // max_grad_norm → gradient_clipping
	WarmupSteps Opt[int]        // warmup steps → scheduler.params.warmup_num_steps
	WarmupRatio Opt[float64]    // warmup_ratio: warmup steps ⌈total steps × ratio⌉ when WarmupSteps is not given
	TotalSteps  Opt[int]        // training steps → scheduler.params.total_num_steps
	Precision   string          // "" (not given), "fp32", "bf16" or "fp16" → fp16.enabled, bf16.enabled
	Hidden      int             // model width C, for the ZeRO bucket "auto" keys; 0: unknown
	WorldSize   int             // data-parallel ranks; 0: unknown (Resolve then takes it as an argument)
	// LRScheduler is Hugging Face's lr_scheduler_type: for a file with no scheduler block, the Trainer's
	// schedule of that name (HFSchedulerNames), over TotalSteps with WarmupSteps or WarmupRatio.
	LRScheduler string
}

// DefaultMaxSteps is the run length of every command that is not given one: train's and estimate's --max-steps
// default, and what validate and explain check an "auto" (or missing) total_num_steps with.
const DefaultMaxSteps = 100

// runLength names where a run takes total_num_steps from, for FromRunTime.
func runLength() string { return fmt.Sprintf("--max-steps (default %d)", DefaultMaxSteps) }

// Hugging Face TrainingArguments defaults, used for "auto" keys whose flag is not given.
const (
	hfDefaultMicroBatch  = 8
	hfDefaultGradAccum   = 1
	hfDefaultLR          = 5e-5
	hfDefaultBeta1       = 0.9
	hfDefaultBeta2       = 0.999
	hfDefaultEps         = 1e-8
	hfDefaultWeightDecay = 0.0
	hfDefaultMaxGradNorm = 1.0
	hfDefaultWarmupSteps = 0
)

// validPrecisions lists the values Overrides.Precision accepts.
func validPrecisions() []string { return []string{"fp32", "bf16", "fp16"} }

// resolveAutos fills every "auto" key from the overrides or the Hugging Face defaults.
func (d *decoder) resolveAutos() {
	ov := d.opts.Overrides
	for _, a := range d.autos {
		e := d.ents[a.path]
		fromFlag := func(v any, flag string) { e.v, e.src = v, Source{Kind: FromAutoOverride, Note: flag} }
		fromHF := func(v any, arg string) { e.v, e.src = v, Source{Kind: FromAutoHFDefault, Note: arg} }
		pickInt := func(o Opt[int], def int, flag, arg string) {
			if v, ok := o.Get(); ok {
				fromFlag(int64(v), fmt.Sprintf("%s=%d", flag, v))
			} else {
				fromHF(int64(def), fmt.Sprintf("%s=%d", arg, def))
			}
		}
		pickFloat := func(o Opt[float64], def float64, flag, arg string) {
			if v, ok := o.Get(); ok {
				fromFlag(v, fmt.Sprintf("%s=%g", flag, v))
			} else {
				fromHF(def, fmt.Sprintf("%s=%g", arg, def))
			}
		}
		hidden := func(v int64, formula string) {
			if ov.Hidden > 0 {
				e.v, e.src = v, Source{Kind: FromAutoOverride, Note: fmt.Sprintf("%s, hidden=%d", formula, ov.Hidden)}
				return
			}
			// Known once the model is: train and estimate pass its width.
			e.v, e.src = a.spec.def, Source{Kind: FromRunTime, Note: "the model's width (--model): " + formula}
		}
		h := int64(ov.Hidden)
		switch a.spec.hf {
		case hfMicro:
			pickInt(ov.MicroBatch, hfDefaultMicroBatch, "micro batch", "per_device_train_batch_size")
		case hfGAS:
			pickInt(ov.GradAccum, hfDefaultGradAccum, "gradient accumulation", "gradient_accumulation_steps")
		case hfTBS:
			// Needs the world size: Resolve computes it as Hugging Face does (world × micro × gas).
			e.src = Source{Kind: FromAutoHFDefault, Note: "world_size × per_device_train_batch_size × gradient_accumulation_steps"}
		case hfClip:
			pickFloat(ov.MaxGradNorm, hfDefaultMaxGradNorm, "max grad norm", "max_grad_norm")
		case hfLR, hfWarmupMaxLR:
			pickFloat(ov.LR, hfDefaultLR, "learning rate", "learning_rate")
		case hfBetas:
			if b, ok := ov.Betas.Get(); ok {
				fromFlag([]float64{b[0], b[1]}, fmt.Sprintf("betas=(%g, %g)", b[0], b[1]))
			} else {
				fromHF([]float64{hfDefaultBeta1, hfDefaultBeta2}, fmt.Sprintf("adam_beta1=%g, adam_beta2=%g", hfDefaultBeta1, hfDefaultBeta2))
			}
		case hfEps:
			pickFloat(ov.Eps, hfDefaultEps, "epsilon", "adam_epsilon")
		case hfWeightDecay:
			pickFloat(ov.WeightDecay, hfDefaultWeightDecay, "weight decay", "weight_decay")
		case hfWarmupMinLR:
			fromHF(0.0, "warmup_min_lr=0")
		case hfWarmupSteps:
			if w, note, ok := ov.warmupSteps(); ok {
				fromFlag(int64(w), note)
			} else {
				fromHF(int64(hfDefaultWarmupSteps), fmt.Sprintf("warmup_steps=%d", hfDefaultWarmupSteps))
			}
		case hfTotalSteps:
			if v, ok := ov.TotalSteps.Get(); ok {
				fromFlag(int64(v), fmt.Sprintf("total steps=%d", v))
			} else {
				e.v, e.src = int64(DefaultMaxSteps), Source{Kind: FromRunTime, Note: runLength()}
			}
		case hfFP16, hfBF16:
			want := "fp16"
			if a.spec.hf == hfBF16 {
				want = "bf16"
			}
			if ov.Precision != "" {
				fromFlag(ov.Precision == want, "precision="+ov.Precision)
			} else {
				fromHF(false, want+"=False")
			}
		case hfReduceBucket:
			hidden(h*h, "hidden²")
		case hfPrefetchBucket:
			// Hugging Face truncates: int(0.9 * hidden * hidden).
			hidden(int64(0.9*float64(h)*float64(h)), "0.9·hidden²")
		case hfPersistence:
			hidden(10*h, "10·hidden")
		}
	}
}

// warmupSteps is the warmup the overrides ask for, as Hugging Face's TrainingArguments.get_warmup_steps
// computes it: WarmupSteps when given, else ⌈total steps × WarmupRatio⌉ (in float64, as Python's math.ceil
// of the product); note says where it came from, and ok is false when neither is given.
func (ov Overrides) warmupSteps() (steps int, note string, ok bool) {
	if v, ok := ov.WarmupSteps.Get(); ok {
		return v, fmt.Sprintf("warmup steps=%d", v), true
	}
	r, ok := ov.WarmupRatio.Get()
	if !ok {
		return 0, "", false
	}
	total := ov.TotalSteps.Or(DefaultMaxSteps)
	return int(math.Ceil(float64(total) * r)), fmt.Sprintf("warmup ratio=%g × %d steps, rounded up", r, total), true
}

// checkOverrides applies the mismatch rule and the no-effect warning of Overrides.
func (d *decoder) checkOverrides() {
	ov := d.opts.Overrides
	if r, ok := ov.WarmupRatio.Get(); ok && !(r >= 0 && r <= 1) {
		d.errAt(0, 0, "", fmt.Sprintf("warmup ratio %g is not a fraction of the run's steps (Hugging Face: \"warmup_ratio must lie in range [0,1]\")", r),
			"pass a ratio between 0 and 1, e.g. --warmup-ratio 0.1, or --warmup-steps N")
	}
	if ov.WarmupSteps.Set && ov.WarmupRatio.Set {
		d.warns = append(d.warns, Warning{File: d.file, Note: true,
			Msg: fmt.Sprintf("--warmup-steps %d and --warmup-ratio %g are both given: the steps win, as in Hugging Face's TrainingArguments", ov.WarmupSteps.V, ov.WarmupRatio.V)})
	}
	if ov.Precision != "" && !containsString(validPrecisions(), ov.Precision) {
		d.errAt(0, 0, "", fmt.Sprintf("precision override %q is not one of %s", ov.Precision, quoteList(validPrecisions())),
			"pass fp32, bf16 or fp16")
	}
	used := map[hfKey]bool{} // overrides that reach at least one key
	for _, path := range sortedKeys(d.ents) {
		e := d.ents[path]
		if e.hf == hfNone || !e.given {
			continue
		}
		used[e.hf] = true
		if e.src.Kind != FromFile && e.src.Kind != FromDeprecated {
			continue // "auto": filled, nothing to compare
		}
		want, flag, ok := overrideFor(ov, e.hf)
		if !ok || e.v == nil {
			continue
		}
		if !sameValue(e.v, want) {
			d.errAt(e.line, e.col, path,
				fmt.Sprintf("the file says %s but the %s given on the command line is %s (Hugging Face raises a mismatch error here)", formatValue(e.v), flag, formatValue(want)),
				fmt.Sprintf("write %q: \"auto\" to take the command-line value, or make the two agree", lastName(path)))
		}
	}
	// An optimizer block that is absent is built from the overrides, so they are used; so is a Hugging Face
	// schedule's warmup.
	if _, ok := d.ents["optimizer"]; ok && d.ents["optimizer"].src.Kind == FromGotrain {
		used[hfLR], used[hfBetas], used[hfEps], used[hfWeightDecay] = true, true, true, true
	}
	if d.hfSched != nil {
		used[hfWarmupSteps] = true
	}
	type flagUse struct {
		given bool
		keys  []hfKey
		name  string
		where string
	}
	flags := []flagUse{
		{ov.MicroBatch.Set, []hfKey{hfMicro, hfTBS}, "micro batch", "\"train_micro_batch_size_per_gpu\": \"auto\""},
		{ov.GradAccum.Set, []hfKey{hfGAS, hfTBS}, "gradient accumulation", "\"gradient_accumulation_steps\": \"auto\""},
		{ov.LR.Set, []hfKey{hfLR, hfWarmupMaxLR}, "learning rate", "\"lr\": \"auto\" in optimizer.params"},
		{ov.Betas.Set, []hfKey{hfBetas}, "betas", "\"betas\": \"auto\" in optimizer.params"},
		{ov.Eps.Set, []hfKey{hfEps}, "epsilon", "\"eps\": \"auto\" in optimizer.params"},
		{ov.WeightDecay.Set, []hfKey{hfWeightDecay}, "weight decay", "\"weight_decay\": \"auto\" in optimizer.params"},
		{ov.MaxGradNorm.Set, []hfKey{hfClip}, "max grad norm", "\"gradient_clipping\": \"auto\""},
		{ov.WarmupSteps.Set || ov.WarmupRatio.Set, []hfKey{hfWarmupSteps}, "warmup steps", "\"warmup_num_steps\": \"auto\" in scheduler.params (or, with no scheduler block, --lr-scheduler-type)"},
		{ov.Precision != "" && ov.Precision != "fp32", []hfKey{hfFP16, hfBF16}, "precision", "\"" + ov.Precision + "\": {\"enabled\": \"auto\"}"},
	}
	for _, f := range flags {
		if !f.given {
			continue
		}
		reached := false
		for _, k := range f.keys {
			reached = reached || used[k]
		}
		if !reached {
			d.warnAt(0, 0, "", fmt.Sprintf("the %s given on the command line has no effect: the config has no key it fills", f.name),
				"add "+f.where+" to the config to use it")
		}
	}
}

// overrideFor returns the explicitly given override that fills keys of kind h, with a name for messages.
func overrideFor(ov Overrides, h hfKey) (any, string, bool) {
	switch h {
	case hfMicro:
		if v, ok := ov.MicroBatch.Get(); ok {
			return int64(v), "micro batch size", true
		}
	case hfGAS:
		if v, ok := ov.GradAccum.Get(); ok {
			return int64(v), "gradient accumulation", true
		}
	case hfTBS:
		m, okM := ov.MicroBatch.Get()
		g, okG := ov.GradAccum.Get()
		if okM && okG && ov.WorldSize > 0 {
			return int64(m * g * ov.WorldSize), "world size × micro batch × gradient accumulation", true
		}
	case hfClip:
		if v, ok := ov.MaxGradNorm.Get(); ok {
			return v, "max grad norm", true
		}
	case hfLR, hfWarmupMaxLR:
		if v, ok := ov.LR.Get(); ok {
			return v, "learning rate", true
		}
	case hfBetas:
		if b, ok := ov.Betas.Get(); ok {
			return []float64{b[0], b[1]}, "betas", true
		}
	case hfEps:
		if v, ok := ov.Eps.Get(); ok {
			return v, "epsilon", true
		}
	case hfWeightDecay:
		if v, ok := ov.WeightDecay.Get(); ok {
			return v, "weight decay", true
		}
	case hfWarmupSteps:
		if v, _, ok := ov.warmupSteps(); ok {
			return int64(v), "warmup steps", true
		}
	case hfTotalSteps:
		if v, ok := ov.TotalSteps.Get(); ok {
			return int64(v), "total steps", true
		}
	case hfFP16:
		if ov.Precision != "" {
			return ov.Precision == "fp16", "precision " + ov.Precision, true
		}
	case hfBF16:
		if ov.Precision != "" {
			return ov.Precision == "bf16", "precision " + ov.Precision, true
		}
	}
	return nil, "", false
}

// sameValue compares a file value with an override; floats compare with a relative tolerance so that
// 3e-4 and 0.0003 agree.
func sameValue(a, b any) bool {
	fa, aNum := asFloat(a)
	fb, bNum := asFloat(b)
	if aNum && bNum {
		return math.Abs(fa-fb) <= 1e-12*math.Max(math.Abs(fa), math.Abs(fb))
	}
	la, aList := a.([]float64)
	lb, bList := b.([]float64)
	if aList && bList {
		if len(la) != len(lb) {
			return false
		}
		for i := range la {
			if !sameValue(la[i], lb[i]) {
				return false
			}
		}
		return true
	}
	sa, aStr := a.([]string)
	sb, bStr := b.([]string)
	if aStr || bStr {
		return aStr && bStr && slices.Equal(sa, sb)
	}
	if _, ok := a.(*node); ok {
		return false
	}
	if _, ok := b.(*node); ok {
		return false
	}
	if aList || bList {
		return false
	}
	return a == b
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	}
	return 0, false
}

func lastName(path string) string { return path[strings.LastIndexByte(path, '.')+1:] }

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
