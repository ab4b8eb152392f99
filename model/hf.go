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

// hfShape is the shape a tensor has in a Hugging Face file.
func hfShape(cfg Config, t Tensor) []int {
	switch {
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

// hfIgnored reports the attention mask buffers older exports carry: they are
// not parameters.
func hfIgnored(name string) bool {
	_, rest, ok := hfBlock(name)
	return ok && (rest == "attn.bias" || rest == "attn.masked_bias")
}

// LoadHF reads a Hugging Face GPT-2 model.safetensors (names with or without
// the "transformer." prefix, Conv1D weights, F32/BF16/F16) into host weights
// in the flat layout, wte padded to Vp rows with zeros.
//
// The number of heads cannot be read from tensor shapes, so the config comes
// from the config.json next to path when there is one, else from fallback;
// with neither it is an error. Either way every shape is checked against the
// file. lm_head.weight is accepted only when it equals wte (tied).
func LoadHF(path string, fallback *Config) (Config, []float32, error) {
	st, err := OpenSafetensors(path)
	if err != nil {
		return Config{}, nil, err
	}
	defer st.Close()

	// Map our names to the file's, stripping the optional prefix.
	names := map[string]string{}
	for _, h := range st.Tensors() {
		ours := strings.TrimPrefix(h.Name, "transformer.")
		if prev, dup := names[ours]; dup {
			return Config{}, nil, fmt.Errorf("load %s: tensors %q and %q are the same parameter", path, prev, h.Name)
		}
		names[ours] = h.Name
	}
	cfg, err := hfConfigFor(path, fallback, st, names)
	if err != nil {
		return Config{}, nil, err
	}
	lay := NewLayout(cfg)
	for ours, theirs := range names {
		if _, ok := lay.Lookup(ours); !ok && !hfIgnored(ours) && ours != "lm_head.weight" {
			return Config{}, nil, fmt.Errorf("load %s: unexpected tensor %q: not a GPT-2 parameter of %v", path, theirs, cfg)
		}
	}
	params := make([]float32, lay.NumParams())
	for _, t := range lay.Tensors() {
		theirs, ok := names[t.Name]
		if !ok {
			return Config{}, nil, fmt.Errorf("load %s: missing tensor %q (shape %v)", path, t.Name, hfShape(cfg, t))
		}
		vals, h, err := st.ReadFloat32(theirs)
		if err != nil {
			return Config{}, nil, fmt.Errorf("load: %w", err)
		}
		want := hfShape(cfg, t)
		if !equalShape(h.Shape, want) {
			return Config{}, nil, fmt.Errorf("load %s: tensor %q has shape %v, want %v for %v", path, theirs, h.Shape, want, cfg)
		}
		dst := params[t.Offset : t.Offset+t.Len]
		if isConv1D(t.Name) {
			transpose(dst, vals, want[0], want[1])
		} else {
			copy(dst, vals) // wte fills its V real rows; the padding stays 0
		}
	}
	if theirs, ok := names["lm_head.weight"]; ok {
		vals, h, err := st.ReadFloat32(theirs)
		if err != nil {
			return Config{}, nil, fmt.Errorf("load: %w", err)
		}
		wte, _ := lay.Lookup("wte.weight")
		if !equalShape(h.Shape, []int{cfg.V, cfg.C}) || !equalF32(vals, params[wte.Offset:wte.Offset+cfg.V*cfg.C]) {
			return Config{}, nil, fmt.Errorf("load %s: %q differs from wte.weight; gotrain's GPT-2 ties the output layer to the token embedding", path, theirs)
		}
	}
	return cfg, params, nil
}

// hfConfigFor decides the config of a Hugging Face file and checks it
// against the shapes the file holds.
func hfConfigFor(path string, fallback *Config, st *SafetensorsFile, names map[string]string) (Config, error) {
	shapeOf := func(ours string) ([]int, error) {
		theirs, ok := names[ours]
		if !ok {
			return nil, fmt.Errorf("load %s: missing tensor %q", path, ours)
		}
		h, _ := st.Header(theirs)
		if len(h.Shape) != 2 {
			return nil, fmt.Errorf("load %s: tensor %q has shape %v, want 2 dimensions", path, theirs, h.Shape)
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
	for ours := range names {
		if n, _, ok := hfBlock(ours); ok && n+1 > layers {
			layers = n + 1
		}
	}
	found := Config{V: wte[0], C: wte[1], MaxT: wpe[0], L: layers}

	var cfg Config
	cfgPath := filepath.Join(filepath.Dir(path), "config.json")
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
	if cfg.V != found.V || cfg.C != found.C || cfg.MaxT != found.MaxT || cfg.L != found.L {
		return Config{}, fmt.Errorf("load %s: the file holds V=%d C=%d maxT=%d L=%d (from wte.weight %v, wpe.weight %v and %d blocks) but the config says V=%d C=%d maxT=%d L=%d",
			path, found.V, found.C, found.MaxT, found.L, wte, wpe, found.L, cfg.V, cfg.C, cfg.MaxT, cfg.L)
	}
	return cfg, nil
}

// SaveHF writes host weights (cfg's flat layout) to path as a Hugging Face
// GPT-2 model.safetensors: HF names without prefix, Conv1D weights
// transposed back to (in, out), wte cut to its V real rows, stored as dt
// (F32, BF16 or F16). Write the config with WriteHFConfig.
func SaveHF(path string, cfg Config, params []float32, dt backend.DType) error {
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
