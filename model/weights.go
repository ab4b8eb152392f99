package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// Hugging Face snapshot file names.
const (
	hfConfigName  = "config.json"
	hfWeightsName = "model.safetensors"
	hfIndexName   = "model.safetensors.index.json"
)

// maxIndexBytes bounds model.safetensors.index.json: one line per tensor,
// ~100 bytes each, so even a model with 100,000 tensors stays far below.
const maxIndexBytes = 64 << 20

// Weights reads a Hugging Face checkpoint's tensors into gotrain's flat
// layout for one Config: model.safetensors, or the shards a
// model.safetensors.index.json names, in F32, BF16 or F16. Opening checks
// every name, shape and dtype against the layout and reports every
// problem at once; reading converts to float32 on the fly, so a caller
// can fill any range of the flat layout (a ZeRO rank's partition, one
// parameter group) without holding the whole model. GPT-2 checkpoints may
// carry the "transformer." prefix and store Conv1D (in, out) weights,
// which are transposed. A Weights is not safe for concurrent use; Close
// releases its files.
type Weights struct {
	cfg   Config
	lay   *Layout
	files []*SafetensorsFile
	src   []tensorSource // per layout tensor
}

// tensorSource is where one layout tensor lives in the checkpoint.
type tensorSource struct {
	file   *SafetensorsFile
	h      TensorHeader
	conv1D bool // stored (in, out): transposed on read
	rows   int  // rows stored: V for GPT-2's wte, whose Vp-V padded rows read as 0
}

// OpenSnapshot opens a Hugging Face snapshot directory: config.json gives
// the Config (LoadHFConfig), then the weights are opened as OpenWeights
// does.
func OpenSnapshot(dir string) (*Weights, error) {
	cfg, err := LoadHFConfig(filepath.Join(dir, hfConfigName))
	if err != nil {
		return nil, err
	}
	return OpenWeights(dir, cfg)
}

// OpenWeights opens the weights of a snapshot directory for cfg:
// model.safetensors.index.json and its shards when the index exists, else
// model.safetensors.
func OpenWeights(dir string, cfg Config) (*Weights, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("weights %s: %w", dir, err)
	}
	index := filepath.Join(dir, hfIndexName)
	if _, err := os.Stat(index); err == nil {
		return openIndexed(dir, index, cfg)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("weights %s: %w", dir, err)
	}
	file := filepath.Join(dir, hfWeightsName)
	return openWeightFiles(file, []string{file}, nil, cfg)
}

// openIndexed opens the shards an index names. The index is untrusted:
// shard names must be plain file names in dir (no directories, no ".."),
// and each listed tensor must be in the shard it is mapped to.
func openIndexed(dir, index string, cfg Config) (*Weights, error) {
	raw, err := regularfile.Read("weights index", index, maxIndexBytes)
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&idx); err != nil {
		return nil, fmt.Errorf("weights index %s: %w", index, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("weights index %s: no \"weight_map\" entries; want {\"weight_map\": {tensor name: shard file}}", index)
	}
	seen := map[string]bool{}
	var shards []string
	for name, shard := range idx.WeightMap {
		if shard == "" || shard != filepath.Base(shard) || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return nil, fmt.Errorf("weights index %s: tensor %q maps to %q, which is not a file name in the snapshot directory", index, name, shard)
		}
		if !seen[shard] {
			seen[shard] = true
			shards = append(shards, shard)
		}
	}
	slices.Sort(shards)
	paths := make([]string, len(shards))
	for i, s := range shards {
		paths[i] = filepath.Join(dir, s)
	}
	return openWeightFiles(index, paths, idx.WeightMap, cfg)
}

// openWeightFiles opens files and matches their tensors to cfg's layout.
// weightMap, when not nil, is the index's name → shard file map, checked
// against the files' contents. where names the checkpoint in errors.
func openWeightFiles(where string, paths []string, weightMap map[string]string, cfg Config) (_ *Weights, err error) {
	w := &Weights{cfg: cfg, lay: NewLayout(cfg)}
	defer func() {
		if err != nil {
			w.Close()
		}
	}()
	type located struct {
		file *SafetensorsFile
		h    TensorHeader
	}
	found := map[string]located{} // gotrain's name → file entry
	for _, p := range paths {
		f, err := OpenSafetensors(p)
		if err != nil {
			return nil, err
		}
		w.files = append(w.files, f)
		for _, h := range f.Tensors() {
			ours := h.Name
			if cfg.Arch == ArchGPT2 {
				ours = strings.TrimPrefix(ours, "transformer.")
			}
			if prev, dup := found[ours]; dup {
				return nil, fmt.Errorf("weights %s: tensors %q (%s) and %q (%s) are the same parameter", where, prev.h.Name, prev.file.Path(), h.Name, p)
			}
			found[ours] = located{f, h}
		}
	}
	var problems []string
	if weightMap != nil {
		for name, shard := range weightMap {
			ours := name
			if cfg.Arch == ArchGPT2 {
				ours = strings.TrimPrefix(ours, "transformer.")
			}
			if loc, ok := found[ours]; !ok || filepath.Base(loc.file.Path()) != shard {
				problems = append(problems, fmt.Sprintf("the index maps %q to %s, which does not hold it", name, shard))
			}
		}
	}
	w.src = make([]tensorSource, len(w.lay.Tensors()))
	for i, t := range w.lay.Tensors() {
		loc, ok := found[t.Name]
		want := hfShape(cfg, t)
		if !ok {
			problems = append(problems, fmt.Sprintf("missing %q (shape %v)", t.Name, want))
			continue
		}
		delete(found, t.Name)
		switch {
		case !equalShape(loc.h.Shape, want):
			problems = append(problems, fmt.Sprintf("%q has shape %v, want %v", loc.h.Name, loc.h.Shape, want))
		case loc.h.DType != "F32" && loc.h.DType != "BF16" && loc.h.DType != "F16":
			problems = append(problems, fmt.Sprintf("%q is %s, want F32, BF16 or F16", loc.h.Name, loc.h.DType))
		}
		w.src[i] = tensorSource{file: loc.file, h: loc.h, conv1D: cfg.Arch == ArchGPT2 && isConv1D(t.Name), rows: want[0]}
	}
	if head, ok := found["lm_head.weight"]; ok && cfg.TiedHead {
		// A tied model reads its head from the embedding; a checkpoint that
		// also stores lm_head must store the same matrix.
		delete(found, "lm_head.weight")
		emb := w.src[0]
		if emb.file != nil && !sameTensor(head.file, head.h, emb.file, emb.h) {
			problems = append(problems, fmt.Sprintf("%q differs from the token embedding %q, but the model ties its head to the embedding (tie_word_embeddings)", head.h.Name, emb.h.Name))
		}
	}
	var unexpected []string
	for ours, loc := range found {
		if !ignoredTensor(cfg, ours) {
			unexpected = append(unexpected, fmt.Sprintf("unexpected %q (shape %v): not a parameter of %v", loc.h.Name, loc.h.Shape, cfg))
		}
	}
	slices.Sort(unexpected)
	problems = append(problems, unexpected...)
	if len(problems) > 0 {
		return nil, fmt.Errorf("weights %s do not match the model (%d problems):\n  %s", where, len(problems), strings.Join(problems, "\n  "))
	}
	return w, nil
}

// ignoredTensor reports buffers some exports carry that are not
// parameters: GPT-2's attention masks, older Llama exports' RoPE inv_freq.
func ignoredTensor(cfg Config, name string) bool {
	if cfg.Arch == ArchGPT2 {
		_, rest, ok := hfBlock(name)
		return ok && (rest == "attn.bias" || rest == "attn.masked_bias")
	}
	return strings.HasPrefix(name, "model.layers.") && strings.HasSuffix(name, ".self_attn.rotary_emb.inv_freq")
}

// sameTensor reports whether two tensors hold the same values: the same
// shape, and equal after widening to float32.
func sameTensor(fa *SafetensorsFile, a TensorHeader, fb *SafetensorsFile, b TensorHeader) bool {
	if !equalShape(a.Shape, b.Shape) {
		return false
	}
	const chunk = 1 << 18
	n := a.NumElements()
	x, y := make([]float32, min(n, chunk)), make([]float32, min(n, chunk))
	for off := 0; off < n; off += chunk {
		k := min(chunk, n-off)
		if fa.ReadFloat32At(a, off, x[:k]) != nil || fb.ReadFloat32At(b, off, y[:k]) != nil || !equalF32(x[:k], y[:k]) {
			return false
		}
	}
	return true
}

// Config is the model the weights were matched to.
func (w *Weights) Config() Config { return w.cfg }

// Layout is the flat layout ReadRange fills.
func (w *Weights) Layout() *Layout { return w.lay }

// ReadRange fills dst with elements [off, off+len(dst)) of the flat layout
// (parameter group ranges, a ZeRO partition, the whole model): each
// tensor overlapping the range reads only its overlap, except GPT-2's
// Conv1D weights, which are read whole to transpose.
func (w *Weights) ReadRange(dst []float32, off int) error {
	if off < 0 || off+len(dst) > w.lay.NumParams() {
		return fmt.Errorf("weights: range [%d, %d) outside the %d parameters", off, off+len(dst), w.lay.NumParams())
	}
	end := off + len(dst)
	for i, t := range w.lay.Tensors() {
		a, b := max(off, t.Offset), min(end, t.Offset+t.Len)
		if a >= b {
			continue
		}
		if err := w.readTensor(dst[a-off:b-off], w.src[i], t, a-t.Offset); err != nil {
			return err
		}
	}
	return nil
}

// readTensor fills dst with elements [lo, lo+len(dst)) of layout tensor t.
func (w *Weights) readTensor(dst []float32, s tensorSource, t Tensor, lo int) error {
	if s.conv1D {
		all := make([]float32, t.Len)
		if err := s.file.ReadFloat32At(s.h, 0, all); err != nil {
			return err
		}
		if err := checkFinite(s.file.Path(), s.h.Name, s.h.Shape, all, 0); err != nil {
			return err
		}
		tr := make([]float32, t.Len)
		transpose(tr, all, s.h.Shape[0], s.h.Shape[1])
		copy(dst, tr[lo:])
		return nil
	}
	// Stored rows first; GPT-2's padded wte rows beyond them are zero.
	stored := s.rows * (t.Len / t.Shape[0])
	n := max(0, min(len(dst), stored-lo))
	if n > 0 {
		if err := s.file.ReadFloat32At(s.h, lo, dst[:n]); err != nil {
			return err
		}
		if err := checkFinite(s.file.Path(), s.h.Name, s.h.Shape, dst[:n], lo); err != nil {
			return err
		}
	}
	clear(dst[n:])
	return nil
}

// ReadAll returns every parameter in the flat layout.
func (w *Weights) ReadAll() ([]float32, error) {
	p := make([]float32, w.lay.NumParams())
	return p, w.ReadRange(p, 0)
}

// Close releases the files.
func (w *Weights) Close() error {
	var first error
	for _, f := range w.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	w.files = nil
	return first
}

// LoadSnapshot reads a Hugging Face snapshot directory whole: its Config
// and every parameter in the flat layout.
func LoadSnapshot(dir string) (Config, []float32, error) {
	w, err := OpenSnapshot(dir)
	if err != nil {
		return Config{}, nil, err
	}
	defer w.Close()
	p, err := w.ReadAll()
	if err != nil {
		return Config{}, nil, err
	}
	return w.Config(), p, nil
}
