package model

import "fmt"

// Tensor is one named view of the flat parameter buffer.
type Tensor struct {
	Name   string // Hugging Face name without "transformer.", e.g. "h.3.attn.c_attn.weight"
	Shape  []int  // gotrain's shape: matrices are (out, in) as in PyTorch Linear; wte is (Vp, C)
	Offset int    // first element in the flat buffer
	Len    int    // number of elements, the product of Shape
	Layer  int    // transformer block, or -1 for the embeddings and the final LayerNorm
	Decay  bool   // AdamW weight decay applies: matrices and embeddings, not biases or LN gains
}

// Layout is the order of every parameter in the flat buffer: wte (Vp,C),
// wpe (maxT,C), then block 0's twelve tensors, block 1's, …, then lnfw, lnfb.
// Gradients, fp32 master weights and optimizer moments use the same layout.
// A Layout is immutable and safe for concurrent use.
type Layout struct {
	cfg        Config
	tensors    []Tensor
	index      map[string]int
	layerStart []int // layerStart[l] = offset of block l; layerStart[L] = offset of lnfw
	total      int
}

// blockTensor describes one of the twelve tensors of a transformer block.
type blockTensor struct {
	suffix string // after "h.N."
	shape  func(C int) []int
	decay  bool
}

// blockTensors lists a block's tensors in layout order.
func blockTensors() [12]blockTensor {
	vec := func(k int) func(int) []int { return func(C int) []int { return []int{k * C} } }
	mat := func(out, in int) func(int) []int { return func(C int) []int { return []int{out * C, in * C} } }
	return [12]blockTensor{
		{"ln_1.weight", vec(1), false},
		{"ln_1.bias", vec(1), false},
		{"attn.c_attn.weight", mat(3, 1), true},
		{"attn.c_attn.bias", vec(3), false},
		{"attn.c_proj.weight", mat(1, 1), true},
		{"attn.c_proj.bias", vec(1), false},
		{"ln_2.weight", vec(1), false},
		{"ln_2.bias", vec(1), false},
		{"mlp.c_fc.weight", mat(4, 1), true},
		{"mlp.c_fc.bias", vec(4), false},
		{"mlp.c_proj.weight", mat(1, 4), true},
		{"mlp.c_proj.bias", vec(1), false},
	}
}

// NewLayout lays out cfg's parameters. cfg must be valid.
func NewLayout(cfg Config) *Layout {
	lay := &Layout{cfg: cfg, index: map[string]int{}}
	add := func(name string, shape []int, layer int, decay bool) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		lay.index[name] = len(lay.tensors)
		lay.tensors = append(lay.tensors, Tensor{Name: name, Shape: shape, Offset: lay.total, Len: n, Layer: layer, Decay: decay})
		lay.total += n
	}
	C := cfg.C
	add("wte.weight", []int{cfg.Vp, C}, -1, true)
	add("wpe.weight", []int{cfg.MaxT, C}, -1, true)
	for l := 0; l < cfg.L; l++ {
		lay.layerStart = append(lay.layerStart, lay.total)
		for _, bt := range blockTensors() {
			add(fmt.Sprintf("h.%d.%s", l, bt.suffix), bt.shape(C), l, bt.decay)
		}
	}
	lay.layerStart = append(lay.layerStart, lay.total)
	add("ln_f.weight", []int{C}, -1, false)
	add("ln_f.bias", []int{C}, -1, false)
	return lay
}

// Config is the shape the layout was made for.
func (lay *Layout) Config() Config { return lay.cfg }

// Tensors lists every tensor in buffer order. The slice is shared: do not
// modify it.
func (lay *Layout) Tensors() []Tensor { return lay.tensors }

// NumParams is the length of the flat buffer.
func (lay *Layout) NumParams() int { return lay.total }

// Lookup finds a tensor by its Hugging Face name (no "transformer." prefix).
func (lay *Layout) Lookup(name string) (Tensor, bool) {
	i, ok := lay.index[name]
	if !ok {
		return Tensor{}, false
	}
	return lay.tensors[i], true
}

// LayerRange is the contiguous range holding block l's twelve tensors.
func (lay *Layout) LayerRange(l int) (off, n int) {
	if l < 0 || l >= lay.cfg.L {
		panic("model: layer out of range")
	}
	return lay.layerStart[l], lay.layerStart[l+1] - lay.layerStart[l]
}

// EmbeddingRange is the range holding wte and wpe (the buffer's start).
func (lay *Layout) EmbeddingRange() (off, n int) { return 0, lay.layerStart[0] }

// FinalRange is the range holding the final LayerNorm (the buffer's end).
func (lay *Layout) FinalRange() (off, n int) {
	off = lay.layerStart[lay.cfg.L]
	return off, lay.total - off
}

// Parameter groups are the units a ZeRO engine gathers, reduces and
// partitions: group 0 holds the embeddings (wte, wpe), groups 1..L hold the
// blocks in order, group L+1 the final LayerNorm. Each is one contiguous
// range and together they tile the buffer.

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
// or a backward pass acquires the parameter groups from its ParamStore:
// forward 0, 1, …, L+1 (the embeddings, the blocks, the final norm);
// backward 0 and L+1 first (the classifier and the final norm need them),
// then the blocks from the last: 0, L+1, L, …, 1.
func (lay *Layout) AcquisitionOrder(backward bool) []int {
	G := lay.NumGroups()
	out := make([]int, G)
	for i := range out {
		out[i] = i
		if backward {
			out[i] = (G - i) % G
		}
	}
	return out
}
