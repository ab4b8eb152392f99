package trainer

import (
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// LoRA fine-tuning: the base model is served by a Frozen engine (its
// parameters partitioned and gathered as the stage says, nothing else) and
// r.eng is the adapters' engine, built beside it, so the loop's ZeroGrad,
// Step and collectives train the adapters only. The adapters are written
// as a PEFT directory (adapter_model.safetensors, adapter_config.json) into
// the output directory at every checkpoint and at the end; the checkpoint
// tag beside it holds the adapters' ZeRO state (fp32 master, moments) in
// their own layout, so a resume, on any world size and stage, continues
// them exactly while the base is read again from --init-from.

// LoRAOptions are a LoRA run's settings (Options.LoRA).
type LoRAOptions struct {
	Config model.LoRA
	// InitAdapter is a PEFT adapter directory to start from; "" initialises
	// as PEFT does (A kaiming-uniform, B zero).
	InitAdapter string
	// BaseName is written as base_model_name_or_path in the saved
	// adapter_config.json and the checkpoints' meta.json (the --init-from
	// snapshot, usually), as an absolute path.
	BaseName string
	// FP32 keeps the adapters in fp32 (storage, compute and the saved
	// file) on a bf16 or fp16 base, as PEFT's get_peft_model does by
	// default; otherwise they take the run's precision with fp32 master
	// weights, as DeepSpeed's engine casting the whole module does.
	FP32 bool
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
	ao := zo
	if lo.FP32 {
		ao.ParamDType, ao.GradAccumDType = backend.F32, backend.F32
	}
	if r.eng, err = zero.NewBeside(r.base, zero.LayoutOf(alay), ao); err != nil {
		return err
	}
	r.adapters, r.adt = alay, ao.ParamDType
	mopts.Store = r.base
	mopts.LoRA = &model.LoRAOptions{Layout: alay, Store: r.eng, DType: ao.ParamDType}
	return nil
}

// initLoRA gives the base its weights (src, or the model's random init)
// and the adapters theirs (--init-adapter, or PEFT's init).
func (r *run) initLoRA(src model.WeightSource) error {
	if err := r.initBase(src); err != nil {
		return err
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
	if err := model.SaveAdapter(r.o.OutputDir, r.adapters, host, r.adt, r.o.LoRA.BaseName); err != nil {
		return "", err
	}
	return filepath.Join(r.o.OutputDir, model.AdapterWeightsFile), nil
}

// initBase gives the frozen base its weights: src (the --init-from files)
// or the model's random initialisation. A resumed LoRA run calls it too,
// since its checkpoints hold the adapters only.
func (r *run) initBase(src model.WeightSource) error {
	if src != nil {
		return InitParamsFrom(r.base, src)
	}
	lay := r.m.Layout()
	return r.base.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, r.o.Seed, g), nil })
}

// checkLoRA refuses a resume that mixes a LoRA run and a full run, or
// changes the adapters' shape (r, target_modules); a changed lora_alpha or
// use_rslora changes the maths, so it needs AllowConfigChange.
func (r *run) checkLoRA(ck *checkpoint.Reader) error {
	saved := ck.Meta().LoRA
	switch {
	case saved == nil && r.base == nil:
		return nil
	case saved == nil:
		return fmt.Errorf("--resume %s: the checkpoint holds a full run's state, and this is a LoRA run; export it (gotrain checkpoint export) and start LoRA from it with --init-from, or resume without the LoRA flags", ck.Tag())
	case r.base == nil:
		return fmt.Errorf("--resume %s: the checkpoint holds LoRA adapters (r %d, lora_alpha %g, target_modules %v); resume with the same LoRA flags, or train the merged model (gotrain checkpoint export --merge --base DIR) with --init-from",
			ck.Tag(), saved.R, saved.Alpha, saved.Target)
	}
	now := r.o.LoRA.Config
	if saved.R != now.R || !slices.Equal(saved.Target, now.Target) {
		return fmt.Errorf("--resume %s: the checkpoint's adapters have r %d and target_modules %v, this run's r %d and %v; pass the checkpoint's LoRA settings",
			ck.Tag(), saved.R, saved.Target, now.R, now.Target)
	}
	if (saved.Alpha != now.Alpha || saved.RSLoRA != now.RSLoRA) && !r.o.AllowConfigChange {
		return fmt.Errorf("--resume %s: the checkpoint's adapters scale by lora_alpha %g (use_rslora %t), this run's by %g (%t), which changes what training computes; restore them (--lora-alpha %g), or pass --allow-config-change",
			ck.Tag(), saved.Alpha, saved.RSLoRA, now.Alpha, now.RSLoRA, saved.Alpha)
	}
	if r.o.LoRA.InitAdapter != "" {
		fmt.Fprintf(r.o.Log, "note: --init-adapter %s is not read: the adapters and their optimizer state come from %s\n", r.o.LoRA.InitAdapter, ck.Tag())
	}
	return nil
}
