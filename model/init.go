package model

import (
	"math"
	"math/rand/v2"
)

// InitParams returns freshly initialized host weights in cfg's flat layout
// (InitGroup's rule for every group).
func InitParams(cfg Config, seed uint64) []float32 {
	lay := NewLayout(cfg)
	p := make([]float32, 0, lay.NumParams())
	for g := range lay.NumGroups() {
		p = append(p, InitGroup(lay, seed, g)...)
	}
	return p
}

// InitGroup returns group g's freshly initialized weights, indexed from the
// group's first element.
//
// GPT-2 follows nanoGPT and llm.c: every weight matrix and both embeddings
// ~ N(0, 0.02), the residual projections (attn.c_proj, mlp.c_proj weights)
// ~ N(0, 0.02/sqrt(2L)), LayerNorm gains 1, every bias 0, and only the V
// real rows of wte drawn (the padded rows stay 0 so they never reach a
// logit). The Llama family follows transformers' _init_weights: every
// Linear weight and the embedding ~ N(0, initializer_range), biases 0,
// RMSNorm gains 1, and the pad_token_id row of the embedding 0.
//
// Each parameter group draws from its own math/rand/v2 PCG stream seeded
// (seed, group), tensor by tensor in layout order, each row-major, one
// NormFloat64 per drawn element — so a ZeRO rank can initialize one group
// at a time without ever holding the whole model. The same seed gives the
// same weights on every machine.
func InitGroup(lay *Layout, seed uint64, g int) []float32 {
	cfg := lay.Config()
	off, n := lay.GroupRange(g)
	p := make([]float32, n)
	rng := rand.New(rand.NewPCG(seed, uint64(g)))
	residStd := InitStd / math.Sqrt(2*float64(cfg.L))
	for _, s := range cfg.specs() {
		for _, t := range groupTensorsOf(lay, g, s) {
			dst := p[t.Offset-off : t.Offset-off+t.Len]
			switch {
			case s.role == roleNorm1W || s.role == roleNorm2W || s.role == roleFinalW || s.role == roleQNorm || s.role == roleKNorm:
				for i := range dst {
					dst[i] = 1
				}
			case !s.decay: // biases
			case cfg.Arch != ArchGPT2:
				normal(rng, dst, cfg.InitStd)
				if s.role == roleEmbed && cfg.PadID >= 0 {
					clear(dst[cfg.PadID*cfg.C : (cfg.PadID+1)*cfg.C])
				}
			case s.role == roleEmbed:
				normal(rng, dst[:cfg.V*cfg.C], InitStd)
			case s.role == roleO || s.role == roleDown:
				normal(rng, dst, residStd)
			default: // wpe and the other weight matrices
				normal(rng, dst, InitStd)
			}
		}
	}
	return p
}

// groupTensorsOf lists the tensors of spec s that lie in group g: the one
// tensor of an embedding or final spec, or block g-1's tensor of a block
// spec.
func groupTensorsOf(lay *Layout, g int, s tensorSpec) []Tensor {
	cfg := lay.Config()
	name := s.name
	if s.block {
		if g < 1 || g > cfg.L {
			return nil
		}
		name = cfg.blockPrefix(g-1) + s.name
	}
	t, ok := lay.Lookup(name)
	if !ok {
		return nil
	}
	if o, n := lay.GroupRange(g); t.Offset < o || t.Offset >= o+n {
		return nil
	}
	return []Tensor{t}
}

func normal(rng *rand.Rand, dst []float32, std float64) {
	for i := range dst {
		dst[i] = float32(rng.NormFloat64() * std)
	}
}
