package trainer

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// LoRA fine-tuning (loraModel, a trainee): the base model is served by a
// Frozen engine (its parameters partitioned and gathered as the stage
// says, nothing else) and the adapters' engine, built beside it, is the
// run's trained engine, so the loop's ZeroGrad, Step and collectives train
// the adapters only. The adapters are written as a PEFT directory
// (adapter_model.safetensors, adapter_config.json) into the output
// directory at every checkpoint and at the end; the checkpoint tag beside
// it holds the adapters' ZeRO state (fp32 master, moments) in their own
// layout, so a resume, on any world size and stage, continues them
// exactly while the base is read again from --init-from.

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

// loraModel trains LoRA adapters (eng) on a frozen base (base).
type loraModel struct {
	weightsOut
	o           LoRAOptions
	base, eng   *zero.Engine
	lay         *model.Layout        // the base's
	adapters    *model.AdapterLayout // the trained parameters'
	dtype       backend.DType        // the adapters'
	seed        uint64
	allowChange bool      // Options.AllowConfigChange
	log         io.Writer // notes on rank 0
}

// newLoRAModel makes the frozen base's engine and the adapters' engine
// and points the model options at them.
func newLoRAModel(r *run, w weightsOut, lay *model.Layout, zo zero.Options, mopts *model.Options) (*loraModel, error) {
	lo := r.o.LoRA
	alay, err := model.NewAdapterLayout(r.o.Model, lo.Config)
	if err != nil {
		return nil, fmt.Errorf("LoRA: %w", err)
	}
	bo := zo
	bo.Frozen = true
	base, err := zero.New(r.cctx, r.be, r.c, zero.LayoutOf(lay), bo)
	if err != nil {
		return nil, err
	}
	ao := zo
	if lo.FP32 {
		ao.ParamDType, ao.GradAccumDType = backend.F32, backend.F32
	}
	eng, err := zero.NewBeside(base, zero.LayoutOf(alay), ao)
	if err != nil {
		base.Close()
		return nil, err
	}
	mopts.Store = base
	mopts.LoRA = &model.LoRAOptions{Layout: alay, Store: eng, DType: ao.ParamDType}
	return &loraModel{weightsOut: w, o: *lo, base: base, eng: eng, lay: lay, adapters: alay, dtype: ao.ParamDType,
		seed: r.o.Seed, allowChange: r.o.AllowConfigChange, log: r.o.Log}, nil
}

func (l *loraModel) layout() checkpoint.Layout { return l.adapters }

// init gives the base its weights (src, or the model's random init) and
// the adapters theirs (--init-adapter, or PEFT's init).
func (l *loraModel) init(src model.WeightSource) error {
	if err := initWeights(l.base, l.lay, l.seed, src); err != nil {
		return err
	}
	var vals []float32
	if dir := l.o.InitAdapter; dir != "" {
		var err error
		if vals, err = model.LoadAdapter(dir, l.adapters); err != nil {
			return fmt.Errorf("--init-adapter: %w", err)
		}
	} else {
		vals = model.InitAdapters(l.adapters, l.seed)
	}
	return l.eng.InitParams(func(g int) ([]float32, error) {
		off, n := l.adapters.GroupRange(g)
		return vals[off : off+n], nil
	})
}

// restore loads the adapters' state; the tag holds nothing of the frozen
// base, which starts where the first run's did.
func (l *loraModel) restore(ck *checkpoint.Reader, src model.WeightSource) error {
	if err := restoreEngine(l.eng, ck); err != nil {
		return err
	}
	return initWeights(l.base, l.lay, l.seed, src)
}

// save writes the adapters as a PEFT directory into the output
// directory, at every checkpoint and at the end.
func (l *loraModel) save(bool) (string, error) {
	host, err := l.eng.HostParams(l.ctx)
	if err != nil || l.rank != 0 || l.dir == "" {
		return "", err
	}
	if err := model.SaveAdapter(l.dir, l.adapters, host, l.dtype, l.o.BaseName); err != nil {
		return "", err
	}
	return filepath.Join(l.dir, model.AdapterWeightsFile), nil
}

func (l *loraModel) describe(meta *checkpoint.Metadata) {
	meta.LoRA = checkpoint.LoRAConfigOf(l.o.Config, l.o.BaseName, l.dtype)
}

// flopsPerToken leaves out the frozen base's weight gradients and adds
// the adapters' own products.
func (l *loraModel) flopsPerToken(T int) float64 { return l.adapters.FlopsPerToken(T) }

func (l *loraModel) engines() []*zero.Engine { return []*zero.Engine{l.eng, l.base} }

// check refuses a resume from a full run's checkpoint, or one that changes
// the adapters' shape (r, target_modules); a changed lora_alpha or
// use_rslora changes the maths, so it needs AllowConfigChange.
func (l *loraModel) check(ck *checkpoint.Reader) error {
	saved, now := ck.Meta().LoRA, l.o.Config
	switch {
	case saved == nil:
		return fmt.Errorf("--resume %s: the checkpoint holds a full run's state, and this is a LoRA run; export it (gotrain checkpoint export) and start LoRA from it with --init-from, or resume without the LoRA flags", ck.Tag())
	case saved.R != now.R || !slices.Equal(saved.Target, now.Target):
		return fmt.Errorf("--resume %s: the checkpoint's adapters have r %d and target_modules %v, this run's r %d and %v; pass the checkpoint's LoRA settings",
			ck.Tag(), saved.R, saved.Target, now.R, now.Target)
	case (saved.Alpha != now.Alpha || saved.RSLoRA != now.RSLoRA) && !l.allowChange:
		return fmt.Errorf("--resume %s: the checkpoint's adapters scale by lora_alpha %g (use_rslora %t), this run's by %g (%t), which changes what training computes; restore them (--lora-alpha %g), or pass --allow-config-change",
			ck.Tag(), saved.Alpha, saved.RSLoRA, now.Alpha, now.RSLoRA, saved.Alpha)
	}
	if l.o.InitAdapter != "" {
		fmt.Fprintf(l.log, "note: --init-adapter %s is not read: the adapters and their optimizer state come from %s\n", l.o.InitAdapter, ck.Tag())
	}
	return checkModel(ck, l.adapters)
}
