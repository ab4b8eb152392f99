package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
)

// The flags as Hugging Face TrainingArguments, TRL, PEFT and Accelerate
// users type them, in one place: the flags that fill a DeepSpeed config's
// "auto" values, shared by every command that resolves a config, and the
// Hugging Face names of gotrain's own flags.

// flagValues reads a command's flags: a *cli.Context, or config
// validate/explain's cfgArgs (which also takes flags after FILE).
type flagValues interface {
	IsSet(name string) bool
	Int(name string) int
	Float64(name string) float64
	Bool(name string) bool
	String(name string) string
}

// autoFlags are the flags that fill "auto" in a DeepSpeed config. train,
// estimate and config validate/explain take the same set and resolve it
// with autoOverrides, so the pre-flight tools describe the run train starts.
func autoFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "micro-batch-size", Aliases: []string{"per_device_train_batch_size"}, Usage: "fills train_micro_batch_size_per_gpu: \"auto\""},
		&cli.IntFlag{Name: "gradient-accumulation-steps", Aliases: []string{"gradient_accumulation_steps"}, Usage: "fills gradient_accumulation_steps: \"auto\""},
		&cli.Float64Flag{Name: "lr", Aliases: []string{"learning_rate"}, Usage: "fills optimizer lr and warmup_max_lr: \"auto\""},
		&cli.Float64Flag{Name: "weight-decay", Aliases: []string{"weight_decay"}, Usage: "fills optimizer weight_decay: \"auto\""},
		&cli.Float64Flag{Name: "max-grad-norm", Aliases: []string{"max_grad_norm"}, Usage: "fills gradient_clipping: \"auto\""},
		&cli.IntFlag{Name: "warmup-steps", Aliases: []string{"warmup_steps"}, Usage: "fills scheduler warmup_num_steps: \"auto\""},
		&cli.Float64Flag{Name: "warmup-ratio", Aliases: []string{"warmup_ratio"}, Usage: "fills scheduler warmup_num_steps: \"auto\" with ceil(`R` × the run's steps), as Hugging Face does when --warmup-steps is not given (0 ≤ R ≤ 1)"},
		&cli.StringFlag{Name: "lr-scheduler-type", Aliases: []string{"lr_scheduler_type"}, Usage: "for a config without a scheduler block: Hugging Face Trainer's schedule `NAME` (" + strings.Join(config.HFSchedulerNames(), ", ") + "), with --warmup-steps or --warmup-ratio; a config's own scheduler block is used as it is"},
		&cli.BoolFlag{Name: "bf16", Usage: "bf16 mixed precision: fills bf16.enabled: \"auto\" (true) and fp16.enabled: \"auto\" (false)"},
		&cli.BoolFlag{Name: "fp16", Usage: "fp16 mixed precision: fills fp16.enabled: \"auto\" (true) and bf16.enabled: \"auto\" (false)"},
		&cli.StringFlag{Name: "mixed_precision", Aliases: []string{"mixed-precision"}, Usage: "Accelerate's spelling: no, fp16 or bf16 (fills fp16/bf16.enabled: \"auto\")"},
		&cli.Float64Flag{Name: "adam_beta1", Aliases: []string{"adam-beta1"}, Usage: "fills optimizer betas: \"auto\" (first moment; the second is --adam_beta2 or 0.999)"},
		&cli.Float64Flag{Name: "adam_beta2", Aliases: []string{"adam-beta2"}, Usage: "fills optimizer betas: \"auto\" (second moment; the first is --adam_beta1 or 0.9)"},
		&cli.Float64Flag{Name: "adam_epsilon", Aliases: []string{"adam-epsilon"}, Usage: "fills optimizer eps: \"auto\""},
	}
}

// autoOverrides fills ov from the autoFlags given, and its run length from
// --max-steps when the command has a value for it; the world size and the
// model width are the caller's.
func autoOverrides(f flagValues, ov *config.Overrides) error {
	if steps := f.Int("max-steps"); f.IsSet("max-steps") || steps > 0 {
		ov.TotalSteps = config.Some(steps)
	}
	ints := []struct {
		name string
		to   *config.Opt[int]
	}{{"micro-batch-size", &ov.MicroBatch}, {"gradient-accumulation-steps", &ov.GradAccum}, {"warmup-steps", &ov.WarmupSteps}}
	for _, i := range ints {
		if f.IsSet(i.name) {
			*i.to = config.Some(f.Int(i.name))
		}
	}
	floats := []struct {
		name string
		to   *config.Opt[float64]
	}{{"lr", &ov.LR}, {"weight-decay", &ov.WeightDecay}, {"max-grad-norm", &ov.MaxGradNorm},
		{"warmup-ratio", &ov.WarmupRatio}, {"adam_epsilon", &ov.Eps}}
	for _, x := range floats {
		if f.IsSet(x.name) {
			*x.to = config.Some(f.Float64(x.name))
		}
	}
	ov.LRScheduler = f.String("lr-scheduler-type")
	p, err := precisionFlag(f.Bool("bf16"), f.Bool("fp16"), f.String("mixed_precision"))
	if err != nil {
		return err
	}
	ov.Precision = p
	if f.IsSet("adam_beta1") || f.IsSet("adam_beta2") {
		b := [2]float64{0.9, 0.999} // Hugging Face's defaults for the one not given
		if f.IsSet("adam_beta1") {
			b[0] = f.Float64("adam_beta1")
		}
		if f.IsSet("adam_beta2") {
			b[1] = f.Float64("adam_beta2")
		}
		ov.Betas = config.Some(b)
	}
	return nil
}

// hfFlagNames maps gotrain flag names to the names Hugging Face's Trainer
// (TrainingArguments), TRL (SFTConfig) and PEFT (LoraConfig) users type for
// the same setting. withHFNames adds them as aliases wherever a command has
// the flag.
func hfFlagNames() map[string][]string {
	return map[string][]string{
		"output-dir":       {"output_dir"},
		"max-steps":        {"max_steps"},
		"save-every":       {"save_steps"},
		"eval-every":       {"eval_steps"},
		"log-every":        {"logging_steps"},
		"save-total-limit": {"save_total_limit"},
		"init-from":        {"model_name_or_path"},
		"seq-len":          {"max_seq_length", "max_length"}, // TRL's SFTConfig: max_seq_length, later max_length
		"lora-r":           {"lora_r"},
		"lora-alpha":       {"lora_alpha"},
		"lora-dropout":     {"lora_dropout"},
		"lora-target":      {"lora_target_modules"},
		"num_nodes":        {"num_machines"}, // Accelerate's launch
	}
}

// withHFNames adds hfFlagNames' aliases to the flags of cmds and of their
// subcommands, except where the command already has a flag of that name.
func withHFNames(cmds []*cli.Command) []*cli.Command {
	names := hfFlagNames()
	for _, c := range cmds {
		for _, f := range c.Flags {
			for _, alias := range names[f.Names()[0]] {
				if !hasFlag(c, alias) {
					addAlias(f, alias)
				}
			}
		}
		withHFNames(c.Subcommands)
	}
	return cmds
}

// addAlias appends alias to f's names, for the flag types gotrain uses.
func addAlias(f cli.Flag, alias string) {
	switch f := f.(type) {
	case *cli.IntFlag:
		f.Aliases = append(f.Aliases, alias)
	case *cli.Float64Flag:
		f.Aliases = append(f.Aliases, alias)
	case *cli.StringFlag:
		f.Aliases = append(f.Aliases, alias)
	case *cli.BoolFlag:
		f.Aliases = append(f.Aliases, alias)
	case *cli.StringSliceFlag:
		f.Aliases = append(f.Aliases, alias)
	}
}

// precisionFlag is the precision the flags ask for: "" when none is given,
// else fp32, bf16 or fp16. Flags that disagree are an error.
func precisionFlag(bf16, fp16 bool, mixed string) (string, error) {
	var want []string
	if bf16 {
		want = append(want, "bf16")
	}
	if fp16 {
		want = append(want, "fp16")
	}
	switch strings.ToLower(mixed) {
	case "":
	case "no", "fp32":
		want = append(want, "fp32")
	case "bf16", "fp16":
		want = append(want, strings.ToLower(mixed))
	default:
		return "", fmt.Errorf("--mixed_precision %q: choose no, fp16 or bf16", mixed)
	}
	for _, w := range want[min(1, len(want)):] {
		if w != want[0] {
			return "", fmt.Errorf("precision flags disagree (%s); give one of --bf16, --fp16 or --mixed_precision", strings.Join(want, " vs "))
		}
	}
	if len(want) == 0 {
		return "", nil
	}
	return want[0], nil
}

// precisionLabel is the precision a run resolved to, for the start-up line.
func precisionLabel(cfg *config.Config) string {
	switch {
	case cfg.BF16.Enabled:
		return "bf16"
	case cfg.FP16.Enabled:
		return "fp16"
	}
	return "fp32"
}

// autoFP32Warning is the warning for a run whose "auto" precision resolved
// to fp32 for want of a precision flag on a GPU of compute capability sm (major*10+minor) that has bf16
// (sm_80 and later); "" otherwise.
func autoFP32Warning(cfg *config.Config, sm int) string {
	if cfg.BF16.Enabled || cfg.FP16.Enabled || sm < 80 {
		return ""
	}
	var autos []string
	for _, k := range []string{"bf16.enabled", "fp16.enabled"} {
		if s, ok := cfg.Source(k); ok && s.Kind == config.FromAutoHFDefault {
			autos = append(autos, k)
		}
	}
	if len(autos) == 0 {
		return ""
	}
	return fmt.Sprintf("warning: %s \"auto\" resolved to fp32, but this GPU (sm_%d) runs bf16 at several times the speed; pass --bf16 (or --mixed_precision bf16) to use it, or --mixed_precision no to keep fp32 without this warning",
		strings.Join(autos, " and "), sm)
}
