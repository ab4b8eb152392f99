package config_test

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/gotrain/gotrain/config"
)

// Load reads a DeepSpeed config, fills its "auto" keys from the run's
// settings (here the run length, the model width and the world size),
// applies DeepSpeed's code defaults to every key the file leaves out, and
// resolves the batch triangle for the world size. The file is one of the
// configs gotrain ships.
func ExampleLoad() {
	c, err := config.Load(filepath.Join("..", "configs", "ds_zero2.json"), config.Options{
		Strict:    true,
		Overrides: config.Overrides{TotalSteps: config.Some(500), Hidden: 768, WorldSize: 4},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := c.Resolve(4)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("ZeRO stage %d, reduce bucket %d elements (auto: hidden²)\n", c.ZeRO.Stage, c.ZeRO.ReduceBucketSize)
	fmt.Printf("%s lr %g, betas %v, clip %g\n", c.Optimizer.Type, c.Optimizer.LR, c.Optimizer.Betas, c.GradientClipping)
	fmt.Printf("%s over %d steps, %d of warmup\n", c.Scheduler.Type, c.Scheduler.Params.TotalNumSteps, c.Scheduler.Params.WarmupNumSteps)
	fmt.Printf("batch %d = micro %d × accumulation %d × world %d\n", b.TrainBatchSize, b.MicroBatch, b.GradAccum, b.WorldSize)
	// Output:
	// ZeRO stage 2, reduce bucket 589824 elements (auto: hidden²)
	// adamw lr 0.001, betas [0.9 0.95], clip 1
	// WarmupCosineLR over 500 steps, 20 of warmup
	// batch 16 = micro 4 × accumulation 1 × world 4
}

// Parse checks a config held in memory. Every problem is an Error with the
// file, line and key it is about, what is wrong and a fix; a mistyped key
// gets the key DeepSpeed knows. A config with errors must not be used.
func ExampleParse_unknownKey() {
	src := `{
  "train_micro_batch_size_per_gpu": 4,
  "zero_optimisation": {"stage": 2}
}`
	_, err := config.Parse("ds.json", []byte(src), config.Options{Strict: true})
	var errs config.Errors
	if !errors.As(err, &errs) {
		fmt.Println("want config.Errors, got", err)
		return
	}
	for _, e := range errs {
		fmt.Printf("%s line %d: %s: %s\n", e.File, e.Line, e.Path, e.Msg)
	}
	// Output:
	// ds.json line 3: zero_optimisation: unknown key; did you mean zero_optimization?
}
