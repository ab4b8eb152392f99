package model

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/backend"
)

// Hugging Face's GPT-2 stores its linear layers as Conv1D, whose weight is
// (in, out): the transpose of gotrain's (out, in). Those four names per block
// are transposed on the way in and out.
func isConv1D(name string) bool {
	return strings.HasSuffix(name, ".weight") &&
		(strings.Contains(name, ".attn.c_attn.") || strings.Contains(name, ".attn.c_proj.") ||
			strings.Contains(name, ".mlp.c_fc.") || strings.Contains(name, ".mlp.c_proj."))
}

// hfShape is the shape a tensor has in a Hugging Face file: the layout's,
// except GPT-2's wte (V real rows) and Conv1D weights.
func hfShape(cfg Config, t Tensor) []int {
	switch {
	case cfg.Arch != ArchGPT2:
		return t.Shape
	case t.Name == "wte.weight":
		return []int{cfg.V, cfg.C}
	case isConv1D(t.Name):
		return []int{t.Shape[1], t.Shape[0]}
	}
	return t.Shape
}

// hfBlock parses the block number of a name "h.N.…"; ok is false for the
// embeddings, the final LayerNorm and anything else.
func hfBlock(name string) (n int, rest string, ok bool) {
	after, found := strings.CutPrefix(name, "h.")
	if !found {
		return 0, "", false
	}
	num, rest, found := strings.Cut(after, ".")
	if !found {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, rest, true
}

// LoadHF reads one Hugging Face safetensors file into host weights in the
// flat layout: a GPT-2 model.safetensors (names with or without the
// "transformer." prefix, Conv1D weights, wte padded to Vp rows with zeros),
// or a Llama-family model.safetensors; F32, BF16 or F16. A sharded
// snapshot is read with LoadSnapshot.
//
// The number of heads cannot be read from tensor shapes, so the config
// comes from the config.json next to path when there is one, else from
// fallback; with neither it is an error. Either way every name and shape
// is checked against the file (OpenWeights lists every problem). A tied
// head's lm_head.weight is accepted only when it equals the embedding.
func LoadHF(path string, fallback *Config) (Config, []float32, error) {
	cfg, err := hfConfigFor(path, fallback)
	if err != nil {
		return Config{}, nil, err
	}
	w, err := openWeightFiles(path, []string{path}, nil, cfg)
	if err != nil {
		return Config{}, nil, err
	}
	defer w.Close()
	params, err := w.ReadAll()
	if err != nil {
		return Config{}, nil, fmt.Errorf("load %s: %w", path, err)
	}
	return cfg, params, nil
}

// hfConfigFor decides the config of a Hugging Face file: its config.json
// beside it, else fallback. A GPT-2 config is also checked against the
// shapes the file holds, which name V, C, maxT and L at once.
func hfConfigFor(path string, fallback *Config) (Config, error) {
	var cfg Config
	var err error
	cfgPath := filepath.Join(filepath.Dir(path), hfConfigName)
	switch _, statErr := os.Stat(cfgPath); {
	case statErr == nil:
		cfg, err = LoadHFConfig(cfgPath)
		if err != nil {
			return Config{}, fmt.Errorf("load %s: %w", path, err)
		}
	case !errors.Is(statErr, fs.ErrNotExist):
		return Config{}, fmt.Errorf("load %s: %w", path, statErr)
	case fallback != nil:
		cfg = *fallback
	default:
		return Config{}, fmt.Errorf("load %s: no config.json beside it, and the number of heads cannot be read from tensor shapes; put the model's config.json next to the file or name a model preset", path)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("load %s: %w", path, err)
	}
	if cfg.Arch != ArchGPT2 {
		return cfg, nil
	}
	st, err := OpenSafetensors(path)
	if err != nil {
		return Config{}, err
	}
	defer st.Close()
	shapeOf := func(ours string) ([]int, error) {
		h, ok := st.Header(ours)
		if !ok {
			h, ok = st.Header("transformer." + ours)
		}
		if !ok {
			return nil, fmt.Errorf("load %s: missing tensor %q", path, ours)
		}
		if len(h.Shape) != 2 {
			return nil, fmt.Errorf("load %s: tensor %q has shape %v, want 2 dimensions", path, h.Name, h.Shape)
		}
		return h.Shape, nil
	}
	wte, err := shapeOf("wte.weight")
	if err != nil {
		return Config{}, err
	}
	wpe, err := shapeOf("wpe.weight")
	if err != nil {
		return Config{}, err
	}
	layers := 0
	for _, h := range st.Tensors() {
		if n, _, ok := hfBlock(strings.TrimPrefix(h.Name, "transformer.")); ok && n+1 > layers {
			layers = n + 1
		}
	}
	if cfg.V != wte[0] || cfg.C != wte[1] || cfg.MaxT != wpe[0] || cfg.L != layers {
		return Config{}, fmt.Errorf("load %s: the file holds V=%d C=%d maxT=%d L=%d (from wte.weight %v, wpe.weight %v and %d blocks) but the config says V=%d C=%d maxT=%d L=%d",
			path, wte[0], wte[1], wpe[0], layers, wte, wpe, layers, cfg.V, cfg.C, cfg.MaxT, cfg.L)
	}
	return cfg, nil
}

// SaveHF writes host weights (cfg's flat layout) to path as one Hugging
// Face model.safetensors, stored as dt (F32, BF16 or F16), with the names
// and shapes transformers loads: GPT-2's without prefix, Conv1D weights
// transposed back to (in, out) and wte cut to its V real rows; the
// family's as the layout has them (a tied head writes no lm_head). Write
// the config with WriteHFConfig.
func SaveHF(path string, cfg Config, params []float32, dt backend.DType) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	lay := NewLayout(cfg)
	if len(params) != lay.NumParams() {
		return fmt.Errorf("save %s: %d values for %d parameters", path, len(params), lay.NumParams())
	}
	if !dt.IsFloat() {
		return fmt.Errorf("save %s: dtype %s is not a float type", path, dt)
	}
	var tensors []NamedTensor
	for _, t := range lay.Tensors() {
		src := params[t.Offset : t.Offset+t.Len]
		shape := hfShape(cfg, t)
		switch {
		case cfg.Arch != ArchGPT2:
		case t.Name == "wte.weight":
			src = src[:cfg.V*cfg.C]
		case isConv1D(t.Name):
			tr := make([]float32, t.Len)
			transpose(tr, src, t.Shape[0], t.Shape[1])
			src = tr
		}
		tensors = append(tensors, NamedTensor{Name: t.Name, DType: dt, Shape: shape, Data: EncodeFloat32(src, dt)})
	}
	// transformers refuses safetensors files without a known "format".
	return SaveSafetensors(path, tensors, map[string]string{"format": "pt"})
}

// transpose writes the (cols, rows) transpose of the row-major (rows, cols)
// matrix src into dst.
func transpose(dst, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			dst[c*rows+r] = src[r*cols+c]
		}
	}
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
