package model

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// Tensor is one named view of the flat parameter buffer.
type Tensor struct {
	// Name is the Hugging Face name: GPT-2's without "transformer." (e.g.
	// "h.3.attn.c_attn.weight"), the family's as transformers saves them
	// (e.g. "model.layers.3.self_attn.q_proj.weight", "lm_head.weight").
	Name   string
	Shape  []int // gotrain's shape: matrices are (out, in) as in PyTorch Linear; GPT-2's wte is (Vp, C)
	Offset int   // first element in the flat buffer
	Len    int   // number of elements, the product of Shape
	Layer  int   // transformer block, or -1 for the embeddings, the final norm and the head
	// Decay says AdamW's weight decay applies, as Hugging Face's Trainer
	// groups parameters: embeddings and every projection matrix (lm_head
	// included), not biases or norm gains.
	Decay bool
}

// role says what a tensor is to the forward pass, whatever its name.
type role uint8

const (
	roleNone   role = iota
	roleEmbed       // wte / model.embed_tokens: (Vp, C)
	rolePos         // wpe: (MaxT, C)
	roleNorm1W      // ln_1 / input_layernorm
	roleNorm1B
	roleQ // GPT-2's c_attn holds q, k and v; the family's q_proj, with k_proj and v_proj right after
	roleK
	roleV
	roleQB
	roleKB
	roleVB
	roleQNorm
	roleKNorm
	roleO // attn.c_proj / o_proj
	roleOB
	roleNorm2W // ln_2 / post_attention_layernorm
	roleNorm2B
	roleUp  // c_fc / gate_proj, with up_proj right after
	roleUp2 // up_proj
	roleUpB
	roleUp2B
	roleDown // mlp.c_proj / down_proj
	roleDownB
	roleFinalW // ln_f / model.norm
	roleFinalB
	roleHead // lm_head (untied only)
	numRoles
)

// tensorSpec describes one tensor of the layout before offsets exist:
// block tensors have their name after the block prefix and repeat L times.
type tensorSpec struct {
	name  string
	shape []int
	decay bool
	role  role
	block bool // one per block: reps L, name after the block prefix
	reps  int  // 1, or L for a block tensor
}

func (s tensorSpec) elems() int {
	n := 1
	for _, d := range s.shape {
		n *= d
	}
	return n
}

// elemsF is elems in float64, safe from overflow for any shape.
func (s tensorSpec) elemsF() float64 {
	n := 1.0
	for _, d := range s.shape {
		n *= float64(d)
	}
	return n
}

// specs lists c's tensors in layout order: the embeddings, one block's
// (reps L), the final norm and the head. The family's order keeps the
// fused projections contiguous: q_proj, k_proj and v_proj weights (then
// their biases) are one (NH+2·KV)·HD × C matrix, the attention op's qkv
// layout, and gate_proj then up_proj one 2·FF × C matrix, SwiGLU's
// [gate | up] rows. Shapes may be out of range for an invalid c: only
// elemsF is safe before Validate.
func (c Config) specs() []tensorSpec {
	C, L := c.C, c.L
	var out []tensorSpec
	add := func(name string, shape []int, decay bool, r role) {
		out = append(out, tensorSpec{name: name, shape: shape, decay: decay, role: r, reps: 1})
	}
	blk := func(name string, shape []int, decay bool, r role) {
		out = append(out, tensorSpec{name: name, shape: shape, decay: decay, role: r, block: true, reps: L})
	}
	if c.Arch == ArchGPT2 {
		add("wte.weight", []int{c.Vp, C}, true, roleEmbed)
		add("wpe.weight", []int{c.MaxT, C}, true, rolePos)
		blk("ln_1.weight", []int{C}, false, roleNorm1W)
		blk("ln_1.bias", []int{C}, false, roleNorm1B)
		blk("attn.c_attn.weight", []int{3 * C, C}, true, roleQ)
		blk("attn.c_attn.bias", []int{3 * C}, false, roleQB)
		blk("attn.c_proj.weight", []int{C, C}, true, roleO)
		blk("attn.c_proj.bias", []int{C}, false, roleOB)
		blk("ln_2.weight", []int{C}, false, roleNorm2W)
		blk("ln_2.bias", []int{C}, false, roleNorm2B)
		blk("mlp.c_fc.weight", []int{4 * C, C}, true, roleUp)
		blk("mlp.c_fc.bias", []int{4 * C}, false, roleUpB)
		blk("mlp.c_proj.weight", []int{C, 4 * C}, true, roleDown)
		blk("mlp.c_proj.bias", []int{C}, false, roleDownB)
		add("ln_f.weight", []int{C}, false, roleFinalW)
		add("ln_f.bias", []int{C}, false, roleFinalB)
		return out
	}
	q, kv := c.NH*c.HD, c.KV*c.HD
	add("model.embed_tokens.weight", []int{c.Vp, C}, true, roleEmbed)
	blk("input_layernorm.weight", []int{C}, false, roleNorm1W)
	blk("self_attn.q_proj.weight", []int{q, C}, true, roleQ)
	blk("self_attn.k_proj.weight", []int{kv, C}, true, roleK)
	blk("self_attn.v_proj.weight", []int{kv, C}, true, roleV)
	if c.QKVBias {
		blk("self_attn.q_proj.bias", []int{q}, false, roleQB)
		blk("self_attn.k_proj.bias", []int{kv}, false, roleKB)
		blk("self_attn.v_proj.bias", []int{kv}, false, roleVB)
	}
	if c.QKNorm {
		blk("self_attn.q_norm.weight", []int{c.HD}, false, roleQNorm)
		blk("self_attn.k_norm.weight", []int{c.HD}, false, roleKNorm)
	}
	blk("self_attn.o_proj.weight", []int{C, q}, true, roleO)
	if c.OBias {
		blk("self_attn.o_proj.bias", []int{C}, false, roleOB)
	}
	blk("post_attention_layernorm.weight", []int{C}, false, roleNorm2W)
	blk("mlp.gate_proj.weight", []int{c.FF, C}, true, roleUp)
	blk("mlp.up_proj.weight", []int{c.FF, C}, true, roleUp2)
	if c.MLPBias {
		blk("mlp.gate_proj.bias", []int{c.FF}, false, roleUpB)
		blk("mlp.up_proj.bias", []int{c.FF}, false, roleUp2B)
	}
	blk("mlp.down_proj.weight", []int{C, c.FF}, true, roleDown)
	if c.MLPBias {
		blk("mlp.down_proj.bias", []int{C}, false, roleDownB)
	}
	add("model.norm.weight", []int{C}, false, roleFinalW)
	if !c.TiedHead {
		add("lm_head.weight", []int{c.Vp, C}, true, roleHead)
	}
	return out
}

// blockPrefix is the name prefix of block l's tensors.
func (c Config) blockPrefix(l int) string {
	if c.Arch == ArchGPT2 {
		return fmt.Sprintf("h.%d.", l)
	}
	return fmt.Sprintf("model.layers.%d.", l)
}

// span is a range of a parameter group's buffer, relative to the group's
// first element; n == 0 means absent.
type span struct{ off, n int }

// view is the span's slice of a group buffer, or the zero Buffer when the
// tensor is absent or the buffer is (a frozen group's gradients).
func (s span) view(b backend.Buffer) backend.Buffer {
	if s.n == 0 || b.IsNil() {
		return backend.Buffer{}
	}
	return b.Slice(s.off, s.n)
}

// Layout is the order of every parameter in the flat buffer: the
// embeddings, block 0's tensors, block 1's, …, then the final norm and,
// when the head is untied, lm_head (Config.specs gives each
// architecture's order). Gradients, fp32 master weights and optimizer
// moments use the same layout. A Layout is immutable and safe for
// concurrent use.
type Layout struct {
	cfg        Config
	tensors    []Tensor
	index      map[string]int
	layerStart []int // layerStart[l] = offset of block l; layerStart[L] = offset of the final norm
	total      int
	// roles maps each role to its span in its group (the same in every
	// block, relative to the block's start).
	roles [numRoles]span
}

// NewLayout lays out cfg's parameters. cfg must be valid.
func NewLayout(cfg Config) *Layout {
	lay := &Layout{cfg: cfg, index: map[string]int{}}
	add := func(name string, s tensorSpec, layer, groupStart int) {
		n := s.elems()
		lay.index[name] = len(lay.tensors)
		lay.tensors = append(lay.tensors, Tensor{Name: name, Shape: s.shape, Offset: lay.total, Len: n, Layer: layer, Decay: s.decay})
		if layer <= 0 {
			lay.roles[s.role] = span{lay.total - groupStart, n}
		}
		lay.total += n
	}
	specs := cfg.specs()
	i := 0
	for ; i < len(specs) && !specs[i].block; i++ {
		add(specs[i].name, specs[i], -1, 0)
	}
	j := i
	for ; j < len(specs) && specs[j].block; j++ {
	}
	for l := 0; l < cfg.L; l++ {
		lay.layerStart = append(lay.layerStart, lay.total)
		for _, s := range specs[i:j] {
			add(cfg.blockPrefix(l)+s.name, s, l, lay.layerStart[l])
		}
	}
	lay.layerStart = append(lay.layerStart, lay.total)
	for _, s := range specs[j:] {
		add(s.name, s, -1, lay.layerStart[cfg.L])
	}
	lay.checkFused()
	return lay
}

// checkFused panics unless the tensors the forward pass reads as one
// matrix are adjacent (a bug in specs, not in a config).
func (lay *Layout) checkFused() {
	r := &lay.roles
	adjacent := func(a, b role) bool { return r[b].n == 0 || r[a].off+r[a].n == r[b].off }
	if !adjacent(roleQ, roleK) || !adjacent(roleK, roleV) || !adjacent(roleQB, roleKB) || !adjacent(roleKB, roleVB) ||
		!adjacent(roleUp, roleUp2) || !adjacent(roleUpB, roleUp2B) {
		panic("model: fused projections are not adjacent in the layout")
	}
}

// Config is the shape the layout was made for.
func (lay *Layout) Config() Config { return lay.cfg }

// Tensors lists every tensor in buffer order. The slice is shared: do not
// modify it.
func (lay *Layout) Tensors() []Tensor { return lay.tensors }

// NumParams is the length of the flat buffer.
func (lay *Layout) NumParams() int { return lay.total }

// Lookup finds a tensor by its Hugging Face name (GPT-2: no "transformer."
// prefix).
func (lay *Layout) Lookup(name string) (Tensor, bool) {
	i, ok := lay.index[name]
	if !ok {
		return Tensor{}, false
	}
	return lay.tensors[i], true
}

// LayerRange is the contiguous range holding block l's tensors.
func (lay *Layout) LayerRange(l int) (off, n int) {
	if l < 0 || l >= lay.cfg.L {
		panic("model: layer out of range")
	}
	return lay.layerStart[l], lay.layerStart[l+1] - lay.layerStart[l]
}

// EmbeddingRange is the range holding the embeddings (the buffer's start):
// wte and wpe for GPT-2, embed_tokens for the family.
func (lay *Layout) EmbeddingRange() (off, n int) { return 0, lay.layerStart[0] }

// FinalRange is the range holding the final norm and an untied head (the
// buffer's end).
func (lay *Layout) FinalRange() (off, n int) {
	off = lay.layerStart[lay.cfg.L]
	return off, lay.total - off
}

// Parameter groups are the units a ZeRO engine gathers, reduces and
// partitions: group 0 holds the embeddings, groups 1..L hold the blocks in
// order, group L+1 the final norm (and lm_head when untied). Each is one
// contiguous range and together they tile the buffer.

// NumGroups is L + 2.
func (lay *Layout) NumGroups() int { return lay.cfg.L + 2 }

// GroupRange is group g's range of the flat buffer.
func (lay *Layout) GroupRange(g int) (off, n int) {
	switch {
	case g == 0:
		return lay.EmbeddingRange()
	case g >= 1 && g <= lay.cfg.L:
		return lay.LayerRange(g - 1)
	case g == lay.cfg.L+1:
		return lay.FinalRange()
	}
	panic("model: parameter group out of range")
}

// GroupTensors lists group g's tensors, offsets relative to the flat buffer.
func (lay *Layout) GroupTensors(g int) []Tensor {
	off, n := lay.GroupRange(g)
	var out []Tensor
	for _, t := range lay.tensors {
		if t.Offset >= off && t.Offset < off+n {
			out = append(out, t)
		}
	}
	return out
}

// GroupSpans calls f for each of group g's tensors in order with its range
// of the flat buffer and whether weight decay applies (for zero.LayoutOf).
func (lay *Layout) GroupSpans(g int, f func(off, n int, decay bool)) {
	for _, t := range lay.GroupTensors(g) {
		f(t.Offset, t.Len, t.Decay)
	}
}

// AcquisitionOrder is the order in which a forward pass (backward false)
// or a backward pass acquires the parameter groups from its ParamStore.
// Forward: 0, 1, …, L+1 (the embeddings, the blocks, the final norm and
// head). Backward with a tied head: 0 and L+1 first (the classifier reads
// the embeddings, the final norm follows it), then the blocks from the
// last: 0, L+1, L, …, 1; the embeddings stay acquired until the lookup's
// gradient is added at the end. Backward with an untied head: the
// classifier and final norm (L+1), the blocks from the last, then the
// embeddings for the lookup's gradient: L+1, L, …, 1, 0.
func (lay *Layout) AcquisitionOrder(backward bool) []int {
	G := lay.NumGroups()
	out := make([]int, G)
	for i := range out {
		switch {
		case !backward:
			out[i] = i
		case lay.cfg.TiedHead:
			out[i] = (G - i) % G
		default:
			out[i] = G - 1 - i
		}
	}
	return out
}
