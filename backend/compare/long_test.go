package compare

import (
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

func cpuPair() (got, want backend.Backend) {
	return cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 3}), cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
}

// The full shapes are what the selftest promises a real GPU runs:
// sequences of at least 1024 tokens with 8:1 grouped and multi-query heads
// at head sizes 64 and 128 each, and the classifier at 151,936 ids; the
// small ones keep the same head layouts and more than 2·128 tokens.
func TestLongShapesCoverThePaths(t *testing.T) {
	for _, z := range []Size{Full, Small} {
		seen := map[string]bool{}
		for _, s := range AttentionShapes(z) {
			minT := 1024
			if z == Small {
				minT = 257
			}
			if s.T < minT || s.NH/s.KV != 8 {
				t.Errorf("%s: %s has T < %d or not 8 query heads a key/value head", z, s, minT)
			}
			seen[s.Groups()+"/"+map[int]string{64: "64", 128: "128"}[s.HD]] = true
		}
		for _, want := range []string{"GQA 8:1/64", "GQA 8:1/128", "MQA 8:1/64", "MQA 8:1/128"} {
			if !seen[want] {
				t.Errorf("%s: no attention shape with %s", z, want)
			}
		}
		maxV := 0
		for _, s := range ClassifierShapes(z) {
			maxV = max(maxV, s.V)
		}
		if want := map[Size]int{Full: 151936, Small: 65541}[z]; maxV != want {
			t.Errorf("%s: largest classifier vocabulary %d, want %d", z, maxV, want)
		}
	}
}

// Two CPU backends that split the work differently agree on the small
// extended shapes in fp32 and bf16, well inside what each element may
// differ by.
func TestLongShapesCPU(t *testing.T) {
	got, want := cpuPair()
	for _, d := range LongDTypes() {
		for i, s := range AttentionShapes(Small)[:2] {
			res, err := RunAttention(got, want, s, d.Act, uint64(i+1))
			checkAll(t, s.String()+"/"+d.Name, res, err, []string{"attention out", "attention lse", "attention dqkv"})
		}
		for i, s := range ClassifierShapes(Small) {
			res, err := RunClassifier(got, want, s, d.Act, uint64(i+1))
			checkAll(t, s.String()+"/"+d.Name, res, err, []string{"crossentropy probs", "fused classifier dlogits"})
		}
	}
}

func checkAll(t *testing.T, name string, res []Result, err error, want []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	seen := map[string]bool{}
	for _, r := range res {
		seen[r.Tensor] = true
		if !r.OK() || r.Worst > 0.5 {
			t.Errorf("%s: %s: max error %.3g, worst %.3g of its allowance, %d of %d bad %s", name, r.Tensor, r.MaxErr,
				r.Worst, r.Bad, r.N, r.Err)
		}
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("%s: no result %q", name, w)
		}
	}
}

// skewed is the CPU backend with attention backward's result off by a
// relative factor: a stand-in for a kernel that is slightly wrong.
type skewed struct {
	*cpu.Backend
	factor float32
}

func (s skewed) AttentionBackward(dqkv, dout, out, qkv, lse backend.Buffer, B, T, NH, KV, HD int) {
	s.Backend.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
	s.Scale(dqkv, s.factor)
}

// The allowance is not vacuous: a dqkv 0.1% off fails in fp32, one 5%
// off fails in bf16, while the same errors' rms-relative size stays below
// the bf16 tolerance of the small shapes.
func TestLongAttentionCatchesSmallErrors(t *testing.T) {
	s := AttentionShape{B: 1, T: 40, NH: 8, KV: 1, HD: 64}
	for _, c := range []struct {
		dt     backend.DType
		factor float32
	}{{backend.F32, 1.001}, {backend.BF16, 1.05}} {
		g := skewed{cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 2}), c.factor}
		res, err := RunAttention(g, cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1}), s, c.dt, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Tensor == "attention dqkv" && r.OK() {
				t.Errorf("%s: dqkv scaled by %g passed (worst %.3g of its allowance)", c.dt, c.factor, r.Worst)
			}
			if r.Tensor != "attention dqkv" && !r.OK() {
				t.Errorf("%s: %s failed: %+v", c.dt, r.Tensor, r)
			}
		}
	}
}

// At T = 1 attention is p = 1 on the only key: out = v, dS = 0, and the
// allowance follows from its definition by hand: out and dV get
// (e32 + e16)·|v| and (e32 + e16)·|dO| summed over the group's heads, dQ
// and dK e32·scale·2·Σ|dO∘v| times |k| and |q| (the magnitude of dP and D,
// which cancel exactly).
func TestAttentionAllowanceAtOneToken(t *testing.T) {
	s := AttentionShape{B: 1, T: 1, NH: 2, KV: 1, HD: 2}
	// qkv: q0 q1 (heads 0, 1), k, v.
	qkv := []float64{1, -2, 0.5, 3, -1, 4, 2, -0.25}
	dout := []float64{0.5, 1, -2, 3}
	out := []float64{2, -0.25, 2, -0.25}
	rnd := attRounding{e32Out: 1e-3, e32D: 2e-3, e16: 1e-2}
	aOut, aD := make([]float64, 4), make([]float64, 8)
	attentionAllowance(aOut, aD, qkv, dout, out, s, rnd)
	scale := 1 / math.Sqrt(2)
	mag := func(do []float64) float64 { return 2 * (math.Abs(do[0]*2) + math.Abs(do[1]*-0.25)) }
	m0, m1 := mag(dout[:2]), mag(dout[2:])
	want := []float64{
		// aOut: per head (e32Out+e16)·|v|.
		0.011 * 2, 0.011 * 0.25, 0.011 * 2, 0.011 * 0.25,
	}
	wantD := []float64{
		2e-3 * scale * m0 * 1, 2e-3 * scale * m0 * 4, // dq head 0: |k| = (1, 4)
		2e-3 * scale * m1 * 1, 2e-3 * scale * m1 * 4, // dq head 1
		2e-3 * scale * (m0*1 + m1*0.5), 2e-3 * scale * (m0*2 + m1*3), // dk: Σ_h mag_h·|q_h|
		0.012 * (0.5 + 2), 0.012 * (1 + 3), // dv: (e32D+e16)·Σ_h |dO_h|
	}
	for i := range want {
		if math.Abs(aOut[i]-want[i]) > 1e-12 {
			t.Errorf("aOut[%d] = %g, want %g", i, aOut[i], want[i])
		}
	}
	for i := range wantD {
		if math.Abs(aD[i]-wantD[i]) > 1e-12 {
			t.Errorf("aD[%d] = %g, want %g", i, aD[i], wantD[i])
		}
	}
}
