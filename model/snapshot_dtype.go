package model

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// SnapshotDType is the dtype a Hugging Face snapshot's weights are
// published in: config.json's torch_dtype (transformers v5 writes it as
// dtype), which from_pretrained(torch_dtype="auto") loads them as, or,
// when config.json names none of float32, bfloat16 and float16, the dtype
// of the stored tensors.
func SnapshotDType(dir string) (backend.DType, error) {
	path := filepath.Join(dir, hfConfigName)
	raw, err := regularfile.Read("model config", path, maxHFConfigBytes)
	if err != nil {
		return 0, err
	}
	var doc struct {
		TorchDType *string `json:"torch_dtype"`
		DType      *string `json:"dtype"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, fmt.Errorf("model config %s: %w", path, err)
	}
	for _, s := range []*string{doc.TorchDType, doc.DType} {
		if s == nil {
			continue
		}
		if dt, err := backend.ParseDType(*s); err == nil && dt.IsFloat() {
			return dt, nil
		}
	}
	w, err := OpenSnapshot(dir)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	for _, s := range w.src {
		if dt, ok := map[string]backend.DType{"F32": backend.F32, "BF16": backend.BF16, "F16": backend.F16}[s.h.DType]; ok {
			return dt, nil
		}
	}
	return backend.F32, nil
}
