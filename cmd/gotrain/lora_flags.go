package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// loraFlags are train's LoRA flags (and estimate's, but --init-adapter).
func loraFlags(train bool) []cli.Flag {
	fs := []cli.Flag{
		&cli.StringFlag{Name: "lora-config", Usage: "train LoRA adapters on the frozen model, as PEFT's adapter_config.json `FILE` says (r, lora_alpha, target_modules, use_rslora)"},
		&cli.IntFlag{Name: "lora-r", Usage: "train LoRA adapters of rank `R` on the frozen model (without --lora-config)"},
		&cli.Float64Flag{Name: "lora-alpha", Usage: "LoRA's lora_alpha (default: 8, PEFT's LoraConfig default); the adapters' scale is alpha/r"},
		&cli.Float64Flag{Name: "lora-dropout", Usage: "LoRA's lora_dropout `P` (with --lora-r): dropout on each adapter's input in training, as PEFT's"},
		&cli.StringFlag{Name: "lora-target", Value: "all-linear", Usage: "LoRA target_modules: comma-separated module `NAMES` (q_proj,v_proj; GPT-2: c_attn,c_proj,c_fc) or all-linear"},
		&cli.BoolFlag{Name: "lora-fp32", Usage: "keep the LoRA adapters in fp32 (storage, compute, saved file) on a bf16/fp16 base, as PEFT does by default; without it they take the run's precision with fp32 master weights, as under DeepSpeed"},
	}
	if train {
		fs = append(fs, &cli.StringFlag{Name: "init-adapter", Usage: "start the LoRA adapters from a PEFT adapter `DIR` (adapter_config.json, adapter_model.safetensors); it also sets the LoRA configuration"})
	}
	return fs
}

// loraConfig is the LoRA configuration the flags ask for, or nil.
func loraConfig(c *cli.Context) (*model.LoRA, error) {
	file, dir := c.String("lora-config"), ""
	if c.Command.Name == "train" {
		dir = c.String("init-adapter")
	}
	r := c.Int("lora-r")
	// The shape flags go with --lora-r; a configuration file sets them
	// itself, and without any LoRA configuration they would be ignored.
	for _, f := range []string{"lora-alpha", "lora-dropout", "lora-target", "lora-fp32"} {
		if !c.IsSet(f) {
			continue
		}
		switch {
		case r == 0 && file == "" && dir == "":
			return nil, fmt.Errorf("--%s applies to LoRA: add --lora-r R (or --lora-config FILE), or drop --%s", f, f)
		case r == 0 && f != "lora-fp32":
			from := "--lora-config " + file
			if file == "" {
				from = "--init-adapter " + dir
			}
			return nil, fmt.Errorf("--%s goes with --lora-r: %s sets it; edit its adapter_config.json, or give --lora-r for the configuration", f, from)
		}
	}
	switch {
	case file != "" && r != 0:
		return nil, fmt.Errorf("--lora-config and --lora-r both set the LoRA rank: give one")
	case file != "":
		l, err := model.ParseAdapterConfigFile(file)
		if err != nil {
			return nil, fmt.Errorf("--lora-config: %w", err)
		}
		return &l, nil
	case r != 0:
		alpha := c.Float64("lora-alpha")
		if !c.IsSet("lora-alpha") {
			alpha = model.DefaultLoRAAlpha
		}
		if !(alpha > 0) || math.IsInf(alpha, 0) {
			return nil, fmt.Errorf("--lora-alpha %g: want a positive scale numerator (PEFT's default is %g)", alpha, model.DefaultLoRAAlpha)
		}
		p := c.Float64("lora-dropout")
		if !(p >= 0 && p < 1) {
			return nil, fmt.Errorf("--lora-dropout %g: want a probability in [0, 1)", p)
		}
		return &model.LoRA{R: r, Alpha: alpha, Dropout: p, Target: strings.Split(c.String("lora-target"), ",")}, nil
	case dir != "":
		l, err := model.LoadAdapterConfig(dir)
		if err != nil {
			return nil, fmt.Errorf("--init-adapter: %w", err)
		}
		return &l, nil
	}
	return nil, nil
}

// loraOptions are train's LoRA options from the flags, or nil.
func loraOptions(c *cli.Context) (*trainer.LoRAOptions, error) {
	l, err := loraConfig(c)
	if l == nil || err != nil {
		return nil, err
	}
	return &trainer.LoRAOptions{Config: *l, InitAdapter: c.String("init-adapter"), BaseName: c.String("init-from"),
		FP32: c.Bool("lora-fp32")}, nil
}

// announceLoRA is train's LoRA options (nil: none), whose lines it adds
// to the run header: the adapters' configuration (saying where lora_alpha
// came from when no flag or file set it) and PEFT's
// print_trainable_parameters line.
func announceLoRA(w io.Writer, c *cli.Context, mcfg model.Config) (*trainer.LoRAOptions, error) {
	lo, err := loraOptions(c)
	if lo == nil || err != nil {
		return nil, err
	}
	alay, err := model.NewAdapterLayout(mcfg, lo.Config)
	if err != nil {
		return nil, fmt.Errorf("LoRA: %w", err)
	}
	fmt.Fprintf(w, "LoRA: %s (%d modules)\n", lo.Config, len(alay.Modules())*mcfg.L)
	if c.Int("lora-r") != 0 && !c.IsSet("lora-alpha") {
		fmt.Fprintf(w, "note: lora_alpha %g is PEFT's LoraConfig default (scale alpha/r = %.4g); --lora-alpha sets another\n",
			model.DefaultLoRAAlpha, lo.Config.Scale())
	}
	_, err = fmt.Fprintln(w, model.TrainableParamsLine(alay))
	return lo, err
}
