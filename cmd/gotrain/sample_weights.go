package main

import (
	"fmt"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// sampleAdapter is a LoRA adapter's engine and the model options that
// attach it.
type sampleAdapter struct {
	eng  *zero.Engine
	opts *model.LoRAOptions
}

func (a sampleAdapter) Close() { a.eng.Close() }

// loadSampleAdapter reads the LoRA adapter a for cfg's model into an
// inference engine beside base's (its parameters only, as base's).
func loadSampleAdapter(base *zero.Engine, cfg model.Config, eo zero.Options, a checkpoint.AdapterSource) (sampleAdapter, error) {
	alay, vals, err := a.Load(cfg)
	if err != nil {
		return sampleAdapter{}, fmt.Errorf("--adapter: %w", err)
	}
	eng, err := zero.NewBeside(base, zero.LayoutOf(alay), eo)
	if err != nil {
		return sampleAdapter{}, err
	}
	err = eng.InitParams(func(g int) ([]float32, error) {
		off, n := alay.GroupRange(g)
		return vals[off : off+n], nil
	})
	if err != nil {
		eng.Close()
		return sampleAdapter{}, fmt.Errorf("--adapter %s: %w", a.Dir, err)
	}
	return sampleAdapter{eng: eng, opts: &model.LoRAOptions{Layout: alay, Store: eng}}, nil
}

// sampleWeights resolves --from and --adapter into the base weights to
// open and the LoRA adapter to apply (nil: none). --from may name a LoRA
// run (its output directory, checkpoints directory or a tag), whose files
// record the base and hold the adapter; --adapter names a PEFT adapter
// directory or such a run's checkpoint tag.
func sampleWeights(from, adapter string) (string, *checkpoint.AdapterSource, error) {
	run, isAdapter, err := checkpoint.FindAdapter(from)
	if err != nil {
		return "", nil, fmt.Errorf("--from: %w", err)
	}
	if isAdapter {
		if adapter != "" {
			return "", nil, fmt.Errorf("--from %s holds a LoRA adapter and --adapter names another; give --from BASE --adapter ADAPTER, or --from %s alone", from, from)
		}
		base, err := run.BaseDir()
		if err != nil {
			return "", nil, fmt.Errorf("--from %s is a LoRA run whose base cannot be opened: %w; name it: --from BASE --adapter %s", from, err, from)
		}
		return base, &run, nil
	}
	if adapter == "" {
		return from, nil, nil
	}
	a, ok, err := checkpoint.FindAdapter(adapter)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("--adapter: %w", err)
	case !ok:
		return "", nil, fmt.Errorf("--adapter %s: not a PEFT adapter directory (%s, %s) nor a LoRA run's checkpoint (checkpoints/%s)",
			adapter, model.AdapterConfigFile, model.AdapterWeightsFile, checkpoint.TagName(100))
	}
	return from, &a, nil
}
