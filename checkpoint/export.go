package checkpoint

import (
	"fmt"

	"github.com/gotrain/gotrain/model"
)

// ExportOptions say how ExportHF writes (model.SnapshotOptions: the
// stored dtype, the shard size limit, the snapshot whose tokenizer and
// generation files travel with the weights).
type ExportOptions = model.SnapshotOptions

// ExportHF writes tag's fp32 master weights (tag "" = latest) as a Hugging
// Face snapshot of the tag's architecture in outDir (model.ExportSnapshot:
// config.json with the original model_type and architectures, the weights
// under their Hugging Face names in one file or shards with an index). The
// params file is verified against its checksums first, so a corrupted
// checkpoint is never exported; the weights are then read tensor by tensor,
// never whole. It returns the weight files written.
func ExportHF(dir, tag, outDir string, o ExportOptions) ([]string, error) {
	r, err := Open(dir, tag)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer r.Close()
	if r.meta.LoRA != nil {
		return nil, fmt.Errorf("export: checkpoint %s holds LoRA adapters, not a full model: export the adapter (ExportAdapter), or merge it into its base snapshot (ExportMerged)", r.tag)
	}
	cfg := r.meta.Model.Config()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("export checkpoint %s: %w", r.tag, err)
	}
	if err := r.CheckModel(model.NewLayout(cfg)); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if err := r.verifyKind(Params); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	files, err := model.ExportSnapshot(outDir, cfg, func(dst []float32, off int) error {
		return r.ReadRangeInto(Params, off, dst)
	}, o)
	if err != nil {
		return nil, fmt.Errorf("export checkpoint %s: %w", r.tag, err)
	}
	return files, nil
}
