package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// DefaultMaxShardSize is transformers v4's save_pretrained default: 5 GB
// of tensor data per file, in decimal units as huggingface_hub counts them.
const DefaultMaxShardSize = 5_000_000_000

// SnapshotFileNames lists the files of a snapshot that describe no
// weights but travel with them, a tokenizer and generation defaults, which
// ExportSnapshot copies from SnapshotOptions.CopyFrom when present.
func SnapshotFileNames() []string {
	return []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"}
}

// maxCopiedFile bounds a copied tokenizer or generation file: real
// tokenizer.json files are a few MB (Qwen3's 11 MB).
const maxCopiedFile = 256 << 20

// RangeReader fills dst with elements [off, off+len(dst)) of a flat
// parameter layout: Weights.ReadRange, a checkpoint's params, or a slice.
type RangeReader func(dst []float32, off int) error

// SliceReader reads ranges of host weights already in memory.
func SliceReader(params []float32) RangeReader {
	return func(dst []float32, off int) error {
		if off < 0 || off+len(dst) > len(params) {
			return fmt.Errorf("weights: range [%d, %d) outside the %d parameters", off, off+len(dst), len(params))
		}
		copy(dst, params[off:])
		return nil
	}
}

// SnapshotOptions say how ExportSnapshot writes.
type SnapshotOptions struct {
	DType backend.DType // F32 (zero value), BF16 or F16; config.json's torch_dtype says which
	// MaxShardSize bounds each weight file's tensor data in bytes (0:
	// DefaultMaxShardSize). A model that fits writes model.safetensors;
	// a larger one model-0000i-of-0000K.safetensors files and
	// model.safetensors.index.json, split as huggingface_hub splits.
	MaxShardSize int64
	// CopyFrom is a snapshot directory whose tokenizer.json,
	// tokenizer_config.json and generation_config.json are copied when it
	// has them ("" copies nothing).
	CopyFrom string
}

// ExportSnapshot writes cfg's weights, as read reads them, as a Hugging
// Face snapshot in dir: config.json (with cfg's model_type and
// architectures, torch_dtype the written dtype), the weights under the
// names transformers loads (GPT-2's Conv1D weights transposed back, wte cut
// to V rows, a tied head written once), and the files CopyFrom has. Each
// tensor is read and written in chunks, so the host holds one chunk (one
// GPT-2 Conv1D matrix) at a time whatever the model's size. Every file is
// written to a temporary name and renamed. An earlier export's index in
// dir is removed first and its other weight files once the new ones are in
// place, so the directory never mixes two exports. It returns the weight
// files written.
func ExportSnapshot(dir string, cfg Config, read RangeReader, o SnapshotOptions) ([]string, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("export %s: %w", dir, err)
	}
	if o.DType == 0 {
		o.DType = backend.F32
	}
	if !o.DType.IsFloat() {
		return nil, fmt.Errorf("export %s: dtype %s is not a float type; want fp32, bf16 or fp16", dir, o.DType)
	}
	if o.MaxShardSize == 0 {
		o.MaxShardSize = DefaultMaxShardSize
	}
	if o.MaxShardSize < 0 {
		return nil, fmt.Errorf("export %s: max shard size %d bytes, want a positive size", dir, o.MaxShardSize)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	// An earlier export's index goes first: a crash while the new files
	// are written then leaves shards without an index, which fails to
	// load, never an index that mixes two exports' shards.
	if err := os.Remove(filepath.Join(dir, hfIndexName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("export: remove the earlier export's index: %w", err)
	}
	lay := NewLayout(cfg)
	tensors := exportOrder(cfg, lay)
	shards := splitShards(tensors, func(t Tensor) int64 { return int64(elems(hfShape(cfg, t))) * int64(o.DType.Size()) }, o.MaxShardSize)
	names := shardNames(len(shards))
	weightMap := map[string]string{}
	var total int64
	for i, shard := range shards {
		st := make([]streamTensor, len(shard))
		for j, t := range shard {
			st[j] = streamTensor{name: t.Name, dt: o.DType, shape: hfShape(cfg, t), write: tensorWriter(cfg, t, read, o.DType)}
			weightMap[t.Name] = names[i]
			total += st[j].bytes()
		}
		// Within a file, names sorted as the safetensors writer sorts them.
		slices.SortFunc(st, func(a, b streamTensor) int {
			switch {
			case a.name < b.name:
				return -1
			case a.name > b.name:
				return 1
			}
			return 0
		})
		path := filepath.Join(dir, names[i])
		err := atomicfile.WriteWith(path, func(w io.Writer) error {
			// transformers refuses safetensors files without a known "format".
			return writeSafetensorsStream(w, st, map[string]string{"format": "pt"})
		})
		if err != nil {
			return nil, fmt.Errorf("export %s: %w", path, err)
		}
	}
	if len(shards) > 1 {
		if err := writeIndex(filepath.Join(dir, hfIndexName), total, weightMap); err != nil {
			return nil, err
		}
	}
	if err := removeStaleWeights(dir, names); err != nil {
		return nil, err
	}
	if err := WriteHFConfigDType(filepath.Join(dir, hfConfigName), cfg, o.DType); err != nil {
		return nil, err
	}
	if o.CopyFrom != "" {
		if err := CopySnapshotFiles(o.CopyFrom, dir); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func elems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// exportOrder is the order transformers' state dict lists cfg's tensors
// in, which decides how huggingface_hub splits them into shards: GPT-2's is
// the layout's; a family block's registers self_attn (q, k, v, o, then
// Qwen3's q/k norms; each Linear its weight then bias), mlp (gate, up,
// down), then the two norms.
func exportOrder(cfg Config, lay *Layout) []Tensor {
	all := lay.Tensors()
	if cfg.Arch == ArchGPT2 {
		return all
	}
	rank := map[string]int{}
	for i, s := range []string{
		"self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight", "self_attn.k_proj.bias",
		"self_attn.v_proj.weight", "self_attn.v_proj.bias", "self_attn.o_proj.weight", "self_attn.o_proj.bias",
		"self_attn.q_norm.weight", "self_attn.k_norm.weight",
		"mlp.gate_proj.weight", "mlp.gate_proj.bias", "mlp.up_proj.weight", "mlp.up_proj.bias",
		"mlp.down_proj.weight", "mlp.down_proj.bias",
		"input_layernorm.weight", "post_attention_layernorm.weight",
	} {
		rank[s] = i
	}
	key := func(t Tensor) int { return rank[t.Name[len(cfg.blockPrefix(t.Layer)):]] }
	out := make([]Tensor, 0, len(all))
	for i := 0; i < len(all); {
		if all[i].Layer < 0 {
			out = append(out, all[i])
			i++
			continue
		}
		j := i
		for j < len(all) && all[j].Layer == all[i].Layer {
			j++
		}
		block := slices.Clone(all[i:j])
		slices.SortStableFunc(block, func(a, b Tensor) int { return key(a) - key(b) })
		out = append(out, block...)
		i = j
	}
	return out
}

// splitShards cuts tensors, in order, into shards as huggingface_hub's
// split_state_dict_into_shards_factory does: a tensor that would take the
// current shard past limit bytes starts a new one, so a tensor larger than
// the limit sits alone.
func splitShards(tensors []Tensor, size func(Tensor) int64, limit int64) [][]Tensor {
	var shards [][]Tensor
	var cur []Tensor
	var n int64
	for _, t := range tensors {
		s := size(t)
		if len(cur) > 0 && n+s > limit {
			shards = append(shards, cur)
			cur, n = nil, 0
		}
		cur = append(cur, t)
		n += s
	}
	return append(shards, cur)
}

// shardNames are huggingface_hub's file names for k shards.
func shardNames(k int) []string {
	if k == 1 {
		return []string{hfWeightsName}
	}
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, k)
	}
	return out
}

// writeIndex writes model.safetensors.index.json as transformers does:
// indent 2, sorted keys, a trailing newline.
func writeIndex(path string, total int64, weightMap map[string]string) error {
	doc := map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, append(b, '\n')); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// shardFile matches huggingface_hub's shard names.
var shardFile = regexp.MustCompile(`^model-[0-9]{5}-of-[0-9]{5}\.safetensors$`)

// removeStaleWeights removes the weight files in dir that keep does not
// name: a model.safetensors beside a new index, shards of another split.
// Only those names are touched.
func removeStaleWeights(dir string, keep []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, e := range entries {
		n := e.Name()
		stale := (n == hfWeightsName || shardFile.MatchString(n)) && !slices.Contains(keep, n)
		if !stale || e.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("export: remove the earlier export's %s: %w", n, err)
		}
	}
	return nil
}

// exportChunk is how many elements a tensor's data is read and encoded in
// at a time: 4 MiB of float32.
const exportChunk = 1 << 20

// tensorWriter streams layout tensor t as it is stored in a Hugging Face
// file, stored as dt.
func tensorWriter(cfg Config, t Tensor, read RangeReader, dt backend.DType) func(io.Writer) error {
	return func(w io.Writer) error {
		if cfg.Arch == ArchGPT2 && isConv1D(t.Name) {
			// (out, in) back to Conv1D's (in, out): a whole matrix, GPT-2's
			// largest is 4C×C.
			src := make([]float32, t.Len)
			if err := read(src, t.Offset); err != nil {
				return err
			}
			tr := make([]float32, t.Len)
			transpose(tr, src, t.Shape[0], t.Shape[1])
			_, err := w.Write(EncodeFloat32(tr, dt))
			return err
		}
		n := elems(hfShape(cfg, t)) // GPT-2's wte: the V real rows of Vp
		buf := make([]float32, min(n, exportChunk))
		for at := 0; at < n; at += len(buf) {
			chunk := buf[:min(len(buf), n-at)]
			if err := read(chunk, t.Offset+at); err != nil {
				return err
			}
			if _, err := w.Write(EncodeFloat32(chunk, dt)); err != nil {
				return err
			}
		}
		return nil
	}
}

// CopySnapshotFiles copies the tokenizer and generation files
// (SnapshotFileNames) that src has into dst, each written to a temporary
// name and renamed. Missing files are skipped; src == dst copies nothing.
func CopySnapshotFiles(src, dst string) error {
	if same, err := sameDir(src, dst); err != nil || same {
		return err
	}
	for _, name := range SnapshotFileNames() {
		from := filepath.Join(src, name)
		if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		b, err := regularfile.Read("snapshot file", from, maxCopiedFile)
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		if err := atomicfile.WriteFile(filepath.Join(dst, name), b); err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
	}
	return nil
}

// sameDir reports whether a and b name one existing directory.
func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, fmt.Errorf("snapshot files: %w", err)
	}
	sb, err := os.Stat(b)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("snapshot files: %w", err)
	}
	return os.SameFile(sa, sb), nil
}
