package trainer

import (
	"fmt"
	"path/filepath"

	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// LoRA fine-tuning: the base model is served by a Frozen engine (its
// parameters partitioned and gathered as the stage says, nothing else) and
// r.eng is the adapters' engine, built beside it, so the loop's ZeroGrad,
// Step and collectives train the adapters only. The adapters are written
// as a PEFT directory (adapter_model.safetensors, adapter_config.json) into
// the output directory at every checkpoint and at the end.

// LoRAOptions are a LoRA run's settings (Options.LoRA).
type LoRAOptions struct {
	Config model.LoRA
	// InitAdapter is a PEFT adapter directory to start from; "" initialises
	// as PEFT does (A kaiming-uniform, B zero).
	InitAdapter string
	// BaseName is written as base_model_name_or_path in the saved
	// adapter_config.json (the --init-from snapshot, usually).
	BaseName string
}

// buildLoRA makes the frozen base's engine and the adapters' engine and
// points the model options at them.
func (r *run) buildLoRA(lay *model.Layout, zo zero.Options, mopts *model.Options) error {
	lo := r.o.LoRA
	alay, err := model.NewAdapterLayout(r.o.Model, lo.Config)
	if err != nil {
		return fmt.Errorf("LoRA: %w", err)
	}
	bo := zo
	bo.Frozen = true
	if r.base, err = zero.New(r.cctx, r.be, r.c, zero.LayoutOf(lay), bo); err != nil {
		return err
	}
	if r.eng, err = zero.NewBeside(r.base, zero.LayoutOf(alay), zo); err != nil {
		return err
	}
	r.adapters = alay
	mopts.Store = r.base
	mopts.LoRA = &model.LoRAOptions{Layout: alay, Store: r.eng}
	return nil
}

// initLoRA gives the base its weights (src, or the model's random init)
// and the adapters theirs (--init-adapter, or PEFT's init).
func (r *run) initLoRA(src model.WeightSource) error {
	if src != nil {
		if err := InitParamsFrom(r.base, src); err != nil {
			return err
		}
	} else {
		lay := r.m.Layout()
		if err := r.base.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, r.o.Seed, g), nil }); err != nil {
			return err
		}
	}
	var vals []float32
	if dir := r.o.LoRA.InitAdapter; dir != "" {
		var err error
		if vals, err = model.LoadAdapter(dir, r.adapters); err != nil {
			return fmt.Errorf("--init-adapter: %w", err)
		}
	} else {
		vals = model.InitAdapters(r.adapters, r.o.Seed)
	}
	return r.eng.InitParams(func(g int) ([]float32, error) {
		off, n := r.adapters.GroupRange(g)
		return vals[off : off+n], nil
	})
}

// saveAdapter writes the adapters as a PEFT directory into the output
// directory. Every rank takes part in gathering them; rank 0 writes.
func (r *run) saveAdapter() (string, error) {
	host, err := r.eng.HostParams(r.cctx)
	if err != nil {
		return "", err
	}
	if r.rank != 0 || r.o.OutputDir == "" {
		return "", nil
	}
	if err := model.SaveAdapter(r.o.OutputDir, r.adapters, host, r.pdt, r.o.LoRA.BaseName); err != nil {
		return "", err
	}
	return filepath.Join(r.o.OutputDir, model.AdapterWeightsFile), nil
}
