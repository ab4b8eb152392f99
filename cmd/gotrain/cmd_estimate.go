package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/configs"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// estimateCommand is `gotrain estimate`: per-rank memory of a run before
// launching it.
func estimateCommand() *cli.Command {
	return &cli.Command{
		Name:      "estimate",
		Usage:     "print the per-rank device and host memory a run will need, before launching it",
		UsageText: "gotrain estimate --model gpt2 --config ds_config.json --nproc 8 [--nodes 2] [--seq-len 1024] [--json]",
		Description: "Computes what each rank will hold — parameters, gradients, fp32 master weights, optimizer\n" +
			"states, activations (with and without checkpointing) and communication buffers, on the device and\n" +
			"in host memory — from the same partition arithmetic the ZeRO engine uses, for the config's stage,\n" +
			"precision, offload and activation checkpointing. Shows the steady footprint after start-up and\n" +
			"the peak during a step (stage-3 gathered parameters, gradient reduction windows), the host total\n" +
			"per node, and DeepSpeed's own model-states estimate for comparison. Nothing is allocated.\n" +
			"`gotrain train` prints the measured numbers next to these at start-up. The flags that fill \"auto\" in\n" +
			"train (--bf16, --micro-batch-size, ...) fill it here the same way, so both describe one run.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"deepspeed_config", "deepspeed"}, Usage: "DeepSpeed JSON config `FILE` (default: the embedded " + configs.Default + ")"},
			&cli.StringFlag{Name: "model", Value: "gpt2-tiny", Usage: "model preset (" + strings.Join(model.PresetNames(), ", ") + "), a Hugging Face snapshot `DIR` or its config.json"},
			&cli.IntFlag{Name: "nproc", Value: 1, Usage: "total data-parallel ranks `N` of the run (all nodes together)"},
			&cli.IntFlag{Name: "nodes", Value: 1, Usage: "machines `K` the ranks are spread over evenly (N/K ranks each); changes only the host total per node"},
			&cli.IntFlag{Name: "seq-len", Value: 256, Usage: "sequence length `T`, as given to train (at most the model's n_positions)"},
			&cli.BoolFlag{Name: "json", Usage: "print the estimate as JSON instead of a table"},
			&cli.BoolFlag{Name: "gradient-checkpointing", Aliases: []string{"gradient_checkpointing"}, Usage: "count activations as train --gradient-checkpointing keeps them (also on when the config has an activation_checkpointing block)"},
			&cli.IntFlag{Name: "max-steps", Value: config.DefaultMaxSteps, Usage: "optimizer steps of the run, as given to train: fills scheduler total_num_steps when it is \"auto\""},
			&cli.BoolFlag{Name: "allow-unknown-keys", Usage: "treat unknown DeepSpeed keys as warnings instead of errors"},
		}, loraFlags(false)...),
		Action: runEstimate,
	}
}

func runEstimate(c *cli.Context) error {
	nproc, nodes := c.Int("nproc"), c.Int("nodes")
	if nproc < 1 {
		return fmt.Errorf("--nproc %d: want at least 1 rank", nproc)
	}
	if nodes < 1 || nproc%nodes != 0 {
		return fmt.Errorf("--nodes %d: must be at least 1 and divide --nproc %d", nodes, nproc)
	}
	mcfg, err := model.ByName(c.String("model"))
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	ov := config.Overrides{Hidden: mcfg.C, WorldSize: nproc}
	if err := autoOverrides(c, &ov); err != nil {
		return err
	}
	cfg, err := loadTrainConfig(c.String("config"), config.Options{Strict: !c.Bool("allow-unknown-keys"), Overrides: ov})
	if cfg != nil {
		for _, w := range cfg.Warnings {
			fmt.Fprintln(c.App.ErrWriter, w)
		}
	}
	if err != nil {
		return err
	}
	eo, err := runEstimateOptions(c, cfg)
	if err != nil {
		return err
	}
	eo.Nodes = nodes
	est, err := trainer.Estimate(cfg, mcfg, nproc, c.Int("seq-len"), eo)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(est)
	}
	if err := formatEstimate(c.App.Writer, est); err != nil {
		return err
	}
	return estimateAdvice(c, cfg, mcfg, nproc, eo)
}

// runEstimateOptions are the estimate options of the run the flags and
// cfg describe. train's memory check and start-up table and estimate's
// table and --gpu-memory advice all take these, so they price one run.
func runEstimateOptions(c *cli.Context, cfg *config.Config) (trainer.EstimateOptions, error) {
	lora, err := loraConfig(c)
	if err != nil {
		return trainer.EstimateOptions{}, err
	}
	return trainer.EstimateOptions{Checkpoint: c.Bool("gradient-checkpointing") || cfg.ActivationCheckpointing.Present,
		LoRA: lora, LoRAFP32: lora != nil && c.Bool("lora-fp32")}, nil
}
