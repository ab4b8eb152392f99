package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/internal/regularfile"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// train --stages FILE: a curriculum of stages, each with its own data,
// sequence length, steps or epochs and learning-rate scale, trained as one
// run by trainer.RunStages. The flags a stage sets itself are refused
// beside --stages rather than silently overridden.

// maxStagesBytes bounds a --stages file: a list of a few stages.
const maxStagesBytes = 1 << 20

// stagesFlagConflicts are the train flags a stages file replaces.
var stagesFlagConflicts = []string{"data", "seq-len", "max-steps", "num-train-epochs"}

// readStages parses --stages (nil without it) and checks that no flag a
// stage sets is given too; --data is required without it.
func readStages(c *cli.Context) ([]trainer.Stage, error) {
	path := c.String("stages")
	if path == "" {
		if len(c.StringSlice("data")) == 0 {
			return nil, fmt.Errorf("--data is required: pass the training token shards (or --stages FILE, whose stages name their own)")
		}
		return nil, nil
	}
	for _, f := range stagesFlagConflicts {
		if c.IsSet(f) {
			return nil, fmt.Errorf("--%s and --stages both set: each stage sets its own data, seq_len and steps or epochs; drop --%s", f, f)
		}
	}
	b, err := regularfile.Read("--stages file", path, maxStagesBytes)
	if err != nil {
		return nil, err
	}
	stages, err := trainer.ParseStages(path, filepath.Dir(path), b)
	if err == nil {
		err = trainer.CheckStageData(stages)
	}
	if err != nil {
		return nil, fmt.Errorf("--stages %s: %w", path, err)
	}
	return stages, nil
}

// trainData is every training shard pattern the run reads: --data, or
// every stage's.
func trainData(c *cli.Context, stages []trainer.Stage) []string {
	if stages == nil {
		return c.StringSlice("data")
	}
	var all []string
	for _, s := range stages {
		all = append(all, s.Data...)
	}
	return all
}

// resolveStages checks the stages against the model and the data and
// counts their steps with the resolved batch.
func resolveStages(c *cli.Context, stages []trainer.Stage, rk launch.Rank, batch config.Batch, mcfg model.Config) ([]trainer.Stage, error) {
	res, err := trainer.ResolveStages(stages, trainer.StagePlan{Model: mcfg, Batch: batch, Rank: rk.Rank,
		Pack: c.Bool("pack"), Shuffle: c.Bool("shuffle"), ValData: c.StringSlice("val-data"), OutputDir: c.String("output-dir")})
	if err != nil {
		return nil, fmt.Errorf("--stages %s: %w", c.String("stages"), err)
	}
	return res, nil
}

// stagesSteps is the curriculum's total step count (it fills "auto"
// total_num_steps: one schedule runs across the stages).
func stagesSteps(c *cli.Context, rk launch.Rank, batch config.Batch, mcfg model.Config) (int, error) {
	stages, err := readStages(c)
	if err != nil {
		return 0, err
	}
	if stages, err = resolveStages(c, stages, rk, batch, mcfg); err != nil {
		return 0, err
	}
	return trainer.TotalSteps(stages), nil
}

// runTraining is trainer.Run, or trainer.RunStages with a curriculum.
func runTraining(ctx context.Context, be backend.Backend, o trainer.Options, stages []trainer.Stage) (*trainer.Result, error) {
	if stages == nil {
		return trainer.Run(ctx, be, o)
	}
	return trainer.RunStages(ctx, be, o, stages)
}
