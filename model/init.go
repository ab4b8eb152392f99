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
// Draws come from one math/rand/v2 PCG stream seeded (seed, seed), taken
// tensor by tensor in layout order (wte's real rows, wpe, then each block's
// qkv, attn proj, fc and mlp proj weights), each row-major, one NormFloat64
// per element. The same seed gives the same weights on every machine.
func InitParams(cfg Config, seed uint64) []float32 {
	lay := NewLayout(cfg)
	p := make([]float32, lay.NumParams())
	rng := rand.New(rand.NewPCG(seed, seed))
	residStd := InitStd / math.Sqrt(2*float64(cfg.L))
	for _, t := range lay.Tensors() {
		dst := p[t.Offset : t.Offset+t.Len]
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
