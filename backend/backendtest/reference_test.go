package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// These tests pin the references to facts derived by hand, so the suite's
// yardstick is itself checked independently of any backend.

func TestRefRoundingKnownValues(t *testing.T) {
	cases := []struct {
		name     string
		round    func(float32) float32
		in, want float32
	}{
		{"bf16 tie to even (down)", RefBF16, 1 + 0x1p-8, 1},
		{"bf16 tie to even (up)", RefBF16, 1 + 3*0x1p-8, 1 + 0x1p-6},
		{"bf16 just above a tie", RefBF16, 1 + 0x1p-8 + 0x1p-20, 1 + 0x1p-7},
		{"bf16 largest finite", RefBF16, 0x1.fep127, 0x1.fep127},
		{"bf16 overflow", RefBF16, math.MaxFloat32, float32(math.Inf(1))},
		{"bf16 subnormal tie", RefBF16, 1.5 * 0x1p-133, 0x1p-132},
		{"f16 largest finite", RefF16, 65519, 65504},
		{"f16 overflow at the tie", RefF16, 65520, float32(math.Inf(1))},
		{"f16 subnormal tie to zero", RefF16, 0x1p-25, 0},
		{"f16 subnormal tie up", RefF16, 1.5 * 0x1p-24, 0x1p-23},
		{"f16 tie to even", RefF16, 1 + 0x1p-11, 1},
	}
	for _, c := range cases {
		if got := c.round(c.in); got != c.want {
			t.Errorf("%s: %g → %g, want %g", c.name, c.in, got, c.want)
		}
	}
	if got := RefDecodeF16(0x3c00); got != 1 {
		t.Errorf("RefDecodeF16(0x3c00) = %g, want 1", got)
	}
	if got := RefDecodeF16(0x0001); got != 0x1p-24 {
		t.Errorf("RefDecodeF16(0x0001) = %g, want 2^-24", got)
	}
	if got := RefDecodeBF16(0xc040); got != -3 {
		t.Errorf("RefDecodeBF16(0xc040) = %g, want -3", got)
	}
}

// gelu(x) − gelu(−x) = x for the tanh form, since tanh is odd.
func TestRefGeluOddPart(t *testing.T) {
	xs := []float64{0, 0.1, 0.5, 1, 2.5, 7}
	neg := make([]float64, len(xs))
	for i, x := range xs {
		neg[i] = -x
	}
	a, b := make([]float64, len(xs)), make([]float64, len(xs))
	RefGeluForward(a, xs)
	RefGeluForward(b, neg)
	for i, x := range xs {
		if math.Abs(a[i]-b[i]-x) > 1e-15 {
			t.Errorf("gelu(%g) − gelu(%g) = %g", x, -x, a[i]-b[i])
		}
	}
}

// Equal logits give probabilities 1/V and loss log V, whatever the padding.
func TestRefCrossEntropyUniform(t *testing.T) {
	const N, V, Vp = 2, 5, 8
	logits := make([]float64, N*Vp)
	for i := range logits {
		logits[i] = 3
	}
	losses, probs := make([]float64, N), make([]float64, N*Vp)
	RefCrossEntropyForward(losses, probs, logits, []int32{0, 4}, N, V, Vp)
	for r := 0; r < N; r++ {
		if math.Abs(losses[r]-math.Log(V)) > 1e-15 {
			t.Errorf("loss[%d] = %g, want log 5", r, losses[r])
		}
		for j := 0; j < Vp; j++ {
			want := 0.0
			if j < V {
				want = 1.0 / V
			}
			if math.Abs(probs[r*Vp+j]-want) > 1e-15 {
				t.Errorf("probs[%d,%d] = %g, want %g", r, j, probs[r*Vp+j], want)
			}
		}
	}
}

// With one position the only attention weight is 1, so out is the value
// head the query head shares, and lse is the one scaled score.
func TestRefAttentionSinglePosition(t *testing.T) {
	const B, T, NH, KV, HD = 2, 1, 4, 2, 3
	S := (NH + 2*KV) * HD
	qkv := make([]float64, B*T*S)
	for i := range qkv {
		qkv[i] = float64(i%7) - 3
	}
	out, lse := make([]float64, B*T*NH*HD), make([]float64, B*NH*T)
	RefAttentionForward(out, lse, qkv, B, T, NH, KV, HD)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			g := h / (NH / KV)
			s := 0.0
			for i := 0; i < HD; i++ {
				v := qkv[b*S+(NH+KV+g)*HD+i]
				if got := out[b*NH*HD+h*HD+i]; got != v {
					t.Errorf("out[%d,%d,%d] = %g, want v = %g", b, h, i, got, v)
				}
				s += qkv[b*S+h*HD+i] * qkv[b*S+(NH+g)*HD+i]
			}
			if want := s / math.Sqrt(HD); math.Abs(lse[b*NH+h]-want) > 1e-12 {
				t.Errorf("lse[%d,%d] = %g, want the scaled score %g", b, h, lse[b*NH+h], want)
			}
		}
	}
}

// Grouped-query attention is multi-head attention with each key/value head
// repeated for its NH/KV query heads (transformers' repeat_kv): the
// reference's outputs equal those of the expanded problem, and its
// key/value gradients equal the expanded gradients summed over each group.
func TestRefAttentionGroupedEqualsRepeated(t *testing.T) {
	const B, T, NH, KV, HD = 2, 5, 6, 2, 3
	G, S, SE := NH/KV, (NH+2*KV)*HD, 3*NH*HD
	r := rand.New(rand.NewPCG(3, 5))
	qkv, dout := make([]float64, B*T*S), make([]float64, B*T*NH*HD)
	for i := range qkv {
		qkv[i] = r.NormFloat64()
	}
	for i := range dout {
		dout[i] = r.NormFloat64()
	}
	exp := make([]float64, B*T*SE) // (B,T,3·NH·HD): q, then each key head G times, then each value head G times
	for bt := 0; bt < B*T; bt++ {
		copy(exp[bt*SE:], qkv[bt*S:bt*S+NH*HD])
		for h := 0; h < NH; h++ {
			copy(exp[bt*SE+(NH+h)*HD:], qkv[bt*S+(NH+h/G)*HD:][:HD])
			copy(exp[bt*SE+(2*NH+h)*HD:], qkv[bt*S+(NH+KV+h/G)*HD:][:HD])
		}
	}
	out, lse := make([]float64, B*T*NH*HD), make([]float64, B*NH*T)
	outE, lseE := make([]float64, B*T*NH*HD), make([]float64, B*NH*T)
	RefAttentionForward(out, lse, qkv, B, T, NH, KV, HD)
	RefAttentionForward(outE, lseE, exp, B, T, NH, NH, HD)
	near := func(name string, got, want []float64) {
		t.Helper()
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*(1+math.Abs(want[i])) {
				t.Fatalf("%s[%d] = %g, expanded problem gives %g", name, i, got[i], want[i])
			}
		}
	}
	near("out", out, outE)
	near("lse", lse, lseE)

	d, dE := make([]float64, B*T*S), make([]float64, B*T*SE)
	RefAttentionBackward(d, dout, nil, qkv, B, T, NH, KV, HD)
	RefAttentionBackward(dE, dout, nil, exp, B, T, NH, NH, HD)
	want := make([]float64, B*T*S)
	for bt := 0; bt < B*T; bt++ {
		copy(want[bt*S:], dE[bt*SE:bt*SE+NH*HD])
		for h := 0; h < NH; h++ {
			for i := 0; i < HD; i++ {
				want[bt*S+(NH+h/G)*HD+i] += dE[bt*SE+(NH+h)*HD+i]
				want[bt*S+(NH+KV+h/G)*HD+i] += dE[bt*SE+(2*NH+h)*HD+i]
			}
		}
	}
	near("dqkv", d, want)

	// D = rowsum(dO∘out) from the exact out is rowsum(P∘dP).
	dOut := make([]float64, B*T*S)
	RefAttentionBackward(dOut, dout, out, qkv, B, T, NH, KV, HD)
	near("dqkv with D from out", dOut, d)
}

// With unit weight and zero bias each row comes out with mean 0 and
// variance σ²/(σ²+eps).
func TestRefLayerNormMoments(t *testing.T) {
	const N, C = 1, 4
	inp := []float64{1, 2, 3, 6} // mean 3, biased variance 3.5
	w, b := []float64{1, 1, 1, 1}, make([]float64, C)
	out, mean, rstd := make([]float64, C), make([]float64, N), make([]float64, N)
	RefLayerNormForward(out, mean, rstd, inp, w, b, N, C)
	m, v := 0.0, 0.0
	for _, o := range out {
		m += o / C
	}
	for _, o := range out {
		v += (o - m) * (o - m) / C
	}
	if mean[0] != 3 || math.Abs(rstd[0]-1/math.Sqrt(3.5+1e-5)) > 1e-15 {
		t.Errorf("mean, rstd = %g, %g", mean[0], rstd[0])
	}
	if math.Abs(m) > 1e-15 || math.Abs(v-3.5/(3.5+1e-5)) > 1e-14 {
		t.Errorf("normalised mean %g, variance %g", m, v)
	}
}

// Adam's first step from zero moments moves each weight by lr·g/(|g|+eps'),
// i.e. about lr against the gradient's sign, whatever its magnitude.
func TestRefAdamWFirstStep(t *testing.T) {
	p := []float64{1, 1, 1}
	g := []float64{3, -0.001, 1e-3}
	m, v := make([]float64, 3), make([]float64, 3)
	RefAdamW(p, g, m, v, backend.AdamWParams{LR: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, GradScale: 1, Step: 1})
	for i := range p {
		want := 1 - 0.1*math.Copysign(1, g[i])
		if math.Abs(p[i]-want) > 1e-6 {
			t.Errorf("p[%d] = %.9g, want ≈ %g", i, p[i], want)
		}
	}
}
