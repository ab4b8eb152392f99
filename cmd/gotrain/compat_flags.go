package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
)

// The train flags Hugging Face TrainingArguments and Accelerate users pass,
// spelled as they spell them: the command-line side of the config's "auto"
// precision, betas and epsilon.

// compatTrainFlags are the precision and Adam flags of `gotrain train`.
func compatTrainFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "bf16", Usage: "bf16 mixed precision: fills bf16.enabled: \"auto\" (true) and fp16.enabled: \"auto\" (false)"},
		&cli.BoolFlag{Name: "fp16", Usage: "fp16 mixed precision: fills fp16.enabled: \"auto\" (true) and bf16.enabled: \"auto\" (false)"},
		&cli.StringFlag{Name: "mixed_precision", Aliases: []string{"mixed-precision"}, Usage: "Accelerate's spelling: no, fp16 or bf16 (fills fp16/bf16.enabled: \"auto\")"},
		&cli.Float64Flag{Name: "adam_beta1", Aliases: []string{"adam-beta1"}, Usage: "fills optimizer betas: \"auto\" (first moment; the second is --adam_beta2 or 0.999)"},
		&cli.Float64Flag{Name: "adam_beta2", Aliases: []string{"adam-beta2"}, Usage: "fills optimizer betas: \"auto\" (second moment; the first is --adam_beta1 or 0.9)"},
		&cli.Float64Flag{Name: "adam_epsilon", Aliases: []string{"adam-epsilon"}, Usage: "fills optimizer eps: \"auto\""},
	}
}

// compatOverrides adds the precision and Adam flags to ov.
func compatOverrides(c *cli.Context, ov *config.Overrides) error {
	p, err := precisionFlag(c.Bool("bf16"), c.Bool("fp16"), c.String("mixed_precision"))
	if err != nil {
		return err
	}
	ov.Precision = p
	if c.IsSet("adam_beta1") || c.IsSet("adam_beta2") {
		b := [2]float64{0.9, 0.999} // Hugging Face's defaults for the one not given
		if c.IsSet("adam_beta1") {
			b[0] = c.Float64("adam_beta1")
		}
		if c.IsSet("adam_beta2") {
			b[1] = c.Float64("adam_beta2")
		}
		ov.Betas = config.Some(b)
	}
	if c.IsSet("adam_epsilon") {
		ov.Eps = config.Some(c.Float64("adam_epsilon"))
	}
	return nil
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
