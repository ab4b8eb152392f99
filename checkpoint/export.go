package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/model"
)

// ExportHF writes tag's fp32 master weights (tag "" = latest) as a Hugging
// Face model of the tag's architecture: outDir/model.safetensors stored as
// dt and outDir/config.json (model.SaveHF, model.WriteHFConfig). The params file is verified against its checksums
// first, so a corrupted checkpoint is never exported.
func ExportHF(dir, tag, outDir string, dt backend.DType) error {
	r, err := Open(dir, tag)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer r.Close()
	cfg := r.meta.Model.Config()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("export checkpoint %s: %w", r.tag, err)
	}
	if err := r.CheckModel(model.NewLayout(cfg)); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := r.verifyKind(Params); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	params, err := r.ReadRange(Params, 0, r.meta.NumParams)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return fmt.Errorf("export checkpoint %s: %w", r.tag, err)
	}
	if err := model.SaveHF(filepath.Join(outDir, "model.safetensors"), cfg, params, dt); err != nil {
		return fmt.Errorf("export checkpoint %s: %w", r.tag, err)
	}
	if err := model.WriteHFConfig(filepath.Join(outDir, "config.json"), cfg); err != nil {
		return fmt.Errorf("export checkpoint %s: %w", r.tag, err)
	}
	return nil
}
