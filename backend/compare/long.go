package compare

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// The shapes of Shapes are small enough for any backend but miss the paths
// that only long sequences and real vocabularies take: attention split
// into several query chunks (with dK and dV accumulated across them), the
// gather and scatter of grouped query heads, and a classifier row far
// wider than a thread block. The shapes here reach them, at a size chosen
// by Size.

// Size picks the dimensions of the extended shapes.
type Size int

const (
	// Full is what a real GPU runs: attention at T ≥ 1024 with 8:1
	// grouped and multi-query heads of 64 and 128, and the classifier at
	// Qwen's vocabulary of 151,936.
	Full Size = iota
	// Small keeps every path of Full (a backend with 128-row query chunks
	// still splits each sequence into three, the last partial, with
	// grouped and multi-query heads of both sizes, and a classifier row of
	// more than 64K ids) at sizes the CPU emulation of the CUDA kernels
	// runs in seconds.
	Small
)

// ParseSize reads "full" or "small".
func ParseSize(s string) (Size, error) {
	switch s {
	case "full":
		return Full, nil
	case "small":
		return Small, nil
	}
	return 0, fmt.Errorf("shape size %q: want full or small", s)
}

func (z Size) String() string {
	if z == Small {
		return "small"
	}
	return "full"
}

// AttentionShape is one causal attention call: B sequences of T tokens,
// NH query heads over KV key/value heads of size HD.
type AttentionShape struct {
	B, T, NH, KV, HD int
}

func (s AttentionShape) String() string {
	return fmt.Sprintf("B%dT%dNH%dKV%dHD%d", s.B, s.T, s.NH, s.KV, s.HD)
}

// Groups names the head grouping: "8:1" query heads per key/value head,
// "MQA" for one key/value head, "MHA" for none shared.
func (s AttentionShape) Groups() string {
	switch {
	case s.KV == 1 && s.NH > 1:
		return fmt.Sprintf("MQA %d:1", s.NH)
	case s.KV == s.NH:
		return "MHA 1:1"
	}
	return fmt.Sprintf("GQA %d:1", s.NH/s.KV)
}

// AttentionShapes are grouped-query (8 query heads per key/value head, two
// key/value heads) and multi-query attention at head sizes 64 and 128.
// Both batch layouts appear (B at most KV and B above it), and no length
// is a multiple of 128 at Small, nor one of each head size at Full, so a
// last query chunk is partial.
func AttentionShapes(z Size) []AttentionShape {
	if z == Small {
		return []AttentionShape{
			{B: 1, T: 272, NH: 16, KV: 2, HD: 128},
			{B: 1, T: 264, NH: 16, KV: 2, HD: 64},
			{B: 2, T: 264, NH: 8, KV: 1, HD: 64},
			{B: 1, T: 272, NH: 8, KV: 1, HD: 128},
		}
	}
	return []AttentionShape{
		{B: 1, T: 1024, NH: 16, KV: 2, HD: 128},
		{B: 2, T: 1100, NH: 16, KV: 2, HD: 64},
		{B: 2, T: 1024, NH: 8, KV: 1, HD: 64},
		{B: 1, T: 1100, NH: 8, KV: 1, HD: 128},
	}
}

// ClassifierShape is N rows of logits over a vocabulary of V ids padded to
// Vp columns.
type ClassifierShape struct {
	N, V, Vp int
}

func (s ClassifierShape) String() string {
	if s.Vp == s.V {
		return fmt.Sprintf("N%dV%d", s.N, s.V)
	}
	return fmt.Sprintf("N%dV%dVp%d", s.N, s.V, s.Vp)
}

// ClassifierShapes are a few rows at Qwen's vocabulary (151,936, unpadded
// as the Llama family keeps it), and at Small a vocabulary just past 64K
// ids (token ids no longer fit 16 bits) with GPT-2-style padding.
func ClassifierShapes(z Size) []ClassifierShape {
	if z == Small {
		return []ClassifierShape{{N: 3, V: 65541, Vp: 65664}}
	}
	return []ClassifierShape{{N: 6, V: 151936, Vp: 151936}, {N: 3, V: 151669, Vp: 151936}}
}

// LongDTypes are the storage dtypes the extended shapes run in: fp32 and
// bf16 (activations and parameters alike).
func LongDTypes() []DTypes {
	return []DTypes{{"fp32", backend.F32, backend.F32}, {"bf16", backend.BF16, backend.BF16}}
}

// RunAttention compares attention forward and backward at s with
// activations in act on got and want (the reference), inputs drawn from
// seed: results "attention out", "attention lse" and "attention dqkv".
// Backward runs on both backends from the reference's out and lse, so its
// comparison measures backward's own error (forward's is compared first).
// An element may differ by the fp32 tolerance of its magnitude, plus what
// rounding the terms it sums may move it by (attRounding), plus in 16-bit
// storage one ulp of itself (2^-7: two nearly equal values may round to
// neighbours).
func RunAttention(got, want backend.Backend, s AttentionShape, act backend.DType, seed uint64) ([]Result, error) {
	return run(got, want, seed, uint64(s.T), func(p *pair) { p.longAttention(s, act) })
}

func (p *pair) longAttention(s AttentionShape, act backend.DType) {
	B, T, NH, KV, HD := s.B, s.T, s.NH, s.KV, s.HD
	qkv := p.normal(act, B*T*(NH+2*KV)*HD, 1)
	out, lse := p.output(act, B*T*NH*HD), p.output(backend.F32, B*NH*T)
	p.g.AttentionForward(out.g, lse.g, qkv.g, B, T, NH, KV, HD)
	p.c.AttentionForward(out.c, lse.c, qkv.c, B, T, NH, KV, HD)
	dout := p.normal(act, B*T*NH*HD, 1)
	aOut, aD := make([]float64, B*T*NH*HD), make([]float64, B*T*(NH+2*KV)*HD)
	attentionAllowance(aOut, aD, p.ref64(qkv), p.ref64(dout), p.ref64(out), s, newAttRounding(s, act))
	rel := 0.0
	if act != backend.F32 {
		rel = 0x1p-7
	}
	p.sameBounded("attention out", out, Tol(backend.F32), aOut, rel)
	p.same("attention lse", lse)
	p.fromRef(out)
	p.fromRef(lse)
	dqkv := p.output(act, B*T*(NH+2*KV)*HD)
	p.g.AttentionBackward(dqkv.g, dout.g, out.g, qkv.g, lse.g, B, T, NH, KV, HD)
	p.c.AttentionBackward(dqkv.c, dout.c, out.c, qkv.c, lse.c, B, T, NH, KV, HD)
	p.sameBounded("attention dqkv", dqkv, Tol(backend.F32), aD, rel)
}

// ref64 is x as the reference holds it, in float64.
func (p *pair) ref64(x twin) []float64 {
	v, err := backend.ReadF32(p.c, x.c)
	p.must(err)
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(f)
	}
	return out
}

// fromRef copies the reference's x into got's (exactly: the values read
// are representable in x's dtype).
func (p *pair) fromRef(x twin) {
	v, err := backend.ReadF32(p.c, x.c)
	p.must(err)
	p.must(backend.WriteF32(p.g, x.g, v))
}

// RunClassifier compares the cross-entropy ops and the fused classifier at
// s with logits in act on got and want (the reference), inputs drawn from
// seed.
func RunClassifier(got, want backend.Backend, s ClassifierShape, act backend.DType, seed uint64) ([]Result, error) {
	return run(got, want, seed, uint64(s.V), func(p *pair) { p.classifier(s.N, s.V, s.Vp, act) })
}
