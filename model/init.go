package model

import (
	"math"
	"math/rand/v2"
	"strings"
)

// InitStd is the standard deviation of GPT-2's weight init.
const InitStd = 0.02

// InitParams returns freshly initialized host weights in cfg's flat layout,
// following nanoGPT and llm.c: every weight matrix and both embeddings
// ~ N(0, 0.02), the residual projections (attn.c_proj, mlp.c_proj weights)
// ~ N(0, 0.02/sqrt(2L)), LayerNorm gains 1, every bias 0, and only the V real
// rows of wte drawn (the padded rows stay 0 so they never reach a logit).
//
// Each parameter group (Layout.GroupRange) draws from its own math/rand/v2
// PCG stream seeded (seed, group), tensor by tensor in layout order, each
// row-major, one NormFloat64 per element — so a ZeRO rank can initialize one
// group at a time without ever holding the whole model. The same seed gives
// the same weights on every machine.
func InitParams(cfg Config, seed uint64) []float32 {
	lay := NewLayout(cfg)
	p := make([]float32, 0, lay.NumParams())
	for g := range lay.NumGroups() {
		p = append(p, InitGroup(lay, seed, g)...)
	}
	return p
}

// InitGroup returns group g's freshly initialized weights (InitParams'
// rule), indexed from the group's first element.
func InitGroup(lay *Layout, seed uint64, g int) []float32 {
	cfg := lay.Config()
	off, n := lay.GroupRange(g)
	p := make([]float32, n)
	rng := rand.New(rand.NewPCG(seed, uint64(g)))
	residStd := InitStd / math.Sqrt(2*float64(cfg.L))
	for _, t := range lay.GroupTensors(g) {
		dst := p[t.Offset-off : t.Offset-off+t.Len]
		switch {
		case strings.HasSuffix(t.Name, "ln_1.weight"), strings.HasSuffix(t.Name, "ln_2.weight"), t.Name == "ln_f.weight":
			for i := range dst {
				dst[i] = 1
			}
		case t.Name == "wte.weight":
			normal(rng, dst[:cfg.V*cfg.C], InitStd)
		case strings.HasSuffix(t.Name, "c_proj.weight"):
			normal(rng, dst, residStd)
		case t.Decay: // wpe and the other weight matrices
			normal(rng, dst, InitStd)
		}
	}
	return p
}

func normal(rng *rand.Rand, dst []float32, std float64) {
	for i := range dst {
		dst[i] = float32(rng.NormFloat64() * std)
	}
}
