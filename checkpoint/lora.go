package checkpoint

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/model"
)

// LoRAConfig is a LoRA tag's adapter configuration in meta.json, under
// PEFT's key names, with the base the adapters were trained on.
type LoRAConfig struct {
	R      int      `json:"r"`
	Alpha  float64  `json:"lora_alpha"`
	RSLoRA bool     `json:"use_rslora"`
	Target []string `json:"target_modules"`
	// Base is base_model_name_or_path: the snapshot the run started from
	// (--init-from), "" for a randomly initialised base.
	Base string `json:"base_model_name_or_path,omitempty"`
	// DType is the dtype the adapters trained in and the run saved them
	// as ("fp32", "bf16" or "fp16"), which an export keeps by default;
	// "" in tags that predate the record.
	DType string `json:"dtype,omitempty"`
}

// LoRAConfigOf is l as a tag records it: trained on base, in dt.
func LoRAConfigOf(l model.LoRA, base string, dt backend.DType) *LoRAConfig {
	return &LoRAConfig{R: l.R, Alpha: l.Alpha, RSLoRA: l.RSLoRA, Target: append([]string(nil), l.Target...), Base: base,
		DType: dt.String()}
}

// TrainedDType is the dtype the adapters trained in: the record, or fp32
// for a tag that predates it (the master values are fp32, so nothing is
// lost).
func (c LoRAConfig) TrainedDType() backend.DType {
	if dt, err := backend.ParseDType(c.DType); err == nil && dt.IsFloat() {
		return dt
	}
	return backend.F32
}

// LoRA is the adapter configuration c records.
func (c LoRAConfig) LoRA() model.LoRA {
	return model.LoRA{R: c.R, Alpha: c.Alpha, RSLoRA: c.RSLoRA, Target: append([]string(nil), c.Target...)}
}

// Adapter reads a LoRA tag's adapters: their layout (the tag's model and
// LoRA configuration) and fp32 master values in it, after verifying the
// params file against its checksums. A full run's tag is refused.
func (r *Reader) Adapter() (*model.AdapterLayout, []float32, error) {
	if r.meta.LoRA == nil {
		return nil, nil, fmt.Errorf("checkpoint %s holds a full model's state, not LoRA adapters (export it without --merge, or name a LoRA run's checkpoints)", r.tag)
	}
	alay, err := model.NewAdapterLayout(r.meta.Model.Config(), r.meta.LoRA.LoRA())
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint %s: %w", r.tag, err)
	}
	if err := r.CheckModel(alay); err != nil {
		return nil, nil, err
	}
	if err := r.verifyKind(Params); err != nil {
		return nil, nil, err
	}
	vals, err := r.ReadRange(Params, 0, alay.NumParams())
	if err != nil {
		return nil, nil, err
	}
	return alay, vals, nil
}

// ExportAdapter writes a LoRA tag's adapters (tag "" = latest) as a PEFT
// adapter directory in outDir (model.SaveAdapter: adapter_model.safetensors
// stored as dt, adapter_config.json naming the tag's base) and returns the
// weights file. dt 0 keeps the dtype the adapters trained in, as the run's
// own adapter file and PEFT's save_pretrained store them.
func ExportAdapter(dir, tag, outDir string, dt backend.DType) (string, error) {
	r, err := Open(dir, tag)
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	defer r.Close()
	alay, vals, err := r.Adapter()
	if err != nil {
		return "", fmt.Errorf("export: %w", err)
	}
	if dt == 0 {
		dt = r.meta.LoRA.TrainedDType()
	}
	if err := model.SaveAdapter(outDir, alay, vals, dt, r.meta.LoRA.Base); err != nil {
		return "", fmt.Errorf("export checkpoint %s: %w", r.tag, err)
	}
	return filepath.Join(outDir, model.AdapterWeightsFile), nil
}

// ExportMerged writes a LoRA tag's adapters (tag "" = latest) merged into
// the base snapshot baseDir (model.MergeAdapter, as PEFT's merge_and_unload
// adds s·B·A) as a Hugging Face snapshot of the base's architecture in
// outDir (model.ExportSnapshot). The base must be the model the adapters
// were trained on. The merge holds the base's weights in host memory as
// fp32, once. o.DType 0 writes the base's own dtype (model.SnapshotDType:
// its config.json's torch_dtype), as merge_and_unload on a model loaded
// with torch_dtype="auto" keeps it. It returns the weight files written.
func ExportMerged(dir, tag, baseDir, outDir string, o ExportOptions) ([]string, error) {
	r, err := Open(dir, tag)
	if err != nil {
		return nil, fmt.Errorf("export --merge: %w", err)
	}
	defer r.Close()
	alay, vals, err := r.Adapter()
	if err != nil {
		return nil, fmt.Errorf("export --merge: %w", err)
	}
	cfg, params, err := model.LoadSnapshot(baseDir)
	if err != nil {
		return nil, fmt.Errorf("export --merge: --base: %w", err)
	}
	if want := alay.Config(); cfg != want {
		return nil, fmt.Errorf("export --merge: --base %s holds %v, but checkpoint %s's adapters were trained on %v (%s); name the snapshot the run started from (--init-from)",
			baseDir, cfg, r.tag, want, strings.Join(cfg.Diff(want), ", "))
	}
	if o.DType == 0 {
		if o.DType, err = model.SnapshotDType(baseDir); err != nil {
			return nil, fmt.Errorf("export --merge: --base: %w", err)
		}
	}
	if err := model.MergeAdapter(model.NewLayout(cfg), alay, params, vals); err != nil {
		return nil, fmt.Errorf("export --merge checkpoint %s: %w", r.tag, err)
	}
	files, err := model.ExportSnapshot(outDir, cfg, model.SliceReader(params), o)
	if err != nil {
		return nil, fmt.Errorf("export --merge checkpoint %s: %w", r.tag, err)
	}
	return files, nil
}
