package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/model"
)

// Kind names one state a checkpoint stores for every parameter.
type Kind string

// The state kinds: fp32 master weights and AdamW's two moments.
const (
	Params   Kind = "params"
	ExpAvg   Kind = "exp_avg"
	ExpAvgSq Kind = "exp_avg_sq"
)

// AllKinds lists every kind in file order.
func AllKinds() []Kind { return []Kind{Params, ExpAvg, ExpAvgSq} }

func (k Kind) valid() bool { return k == Params || k == ExpAvg || k == ExpAvgSq }

// FileName is the kind's file inside a tag directory.
func (k Kind) FileName() string { return string(k) + ".safetensors" }

// Layout is what a tag's files are laid out by: every tensor with its name,
// shape and flat offset, tiling [0, NumParams()). A full run's tag follows
// the model's *model.Layout; a LoRA run's follows its adapters'
// *model.AdapterLayout (the frozen base is not training state: it is read
// again from the snapshot the run started from).
type Layout interface {
	Tensors() []model.Tensor
	NumParams() int
}

// File and directory names inside a checkpoints directory.
const (
	LatestFile = "latest"
	MetaFile   = "meta.json"
	// LayoutName marks, in each file's __metadata__, that tensors are in
	// gotrain's flat orientation (model.Layout: PyTorch Linear (out, in),
	// the embedding padded to Vp rows), not as a Hugging Face export stores
	// them.
	LayoutName = "gotrain-flat"
	tagPrefix  = "global_step"
)

// Dir is the checkpoints directory of a run's output directory.
func Dir(outputDir string) string { return filepath.Join(outputDir, "checkpoints") }

// TagName is the DeepSpeed-style tag of an optimizer step: "global_step<N>".
func TagName(step int64) string { return tagPrefix + strconv.FormatInt(step, 10) }

// tagStep parses a "global_step<N>" tag; ok is false for any other name.
func tagStep(tag string) (int64, bool) {
	s, found := strings.CutPrefix(tag, tagPrefix)
	if !found || s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}

// tmpName is where a tag is written before it is complete. The leading dot
// keeps it out of List, Open and the retention limit.
func tmpName(tag string) string { return "." + tag + ".tmp" }

// checkTag rejects tags that are not one plain directory name.
func checkTag(tag string) error {
	if tag == "" || tag == "." || tag == ".." || strings.HasPrefix(tag, ".") || strings.ContainsAny(tag, "/\\\x00\n") {
		return fmt.Errorf("bad checkpoint tag %q: want one directory name not starting with '.', e.g. %q", tag, TagName(100))
	}
	return nil
}

// fileHeader is the complete header of a kind's file for lay: the 8-byte
// length followed by the JSON padded with spaces to a multiple of 8 bytes.
// It depends only on lay and kind, so every rank computes the same bytes
// and the same data offset. Tensor data starts at len(header), and flat
// element i sits at len(header) + 4·i.
func fileHeader(lay Layout, kind Kind) []byte {
	var js bytes.Buffer
	meta, _ := json.Marshal(map[string]string{"format": "pt", "layout": LayoutName, "kind": string(kind)})
	js.WriteString(`{"__metadata__":`)
	js.Write(meta)
	for _, t := range lay.Tensors() {
		name, _ := json.Marshal(t.Name)
		shape, _ := json.Marshal(t.Shape)
		fmt.Fprintf(&js, `,%s:{"dtype":"F32","shape":%s,"data_offsets":[%d,%d]}`, name, shape, 4*int64(t.Offset), 4*int64(t.Offset+t.Len))
	}
	js.WriteByte('}')
	for (8+js.Len())%8 != 0 {
		js.WriteByte(' ')
	}
	out := make([]byte, 8, 8+js.Len())
	binary.LittleEndian.PutUint64(out, uint64(js.Len()))
	return append(out, js.Bytes()...)
}
