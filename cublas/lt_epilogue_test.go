package cublas

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// refGELU is the tanh GELU, 0.5·x·(1+tanh(√(2/π)(x+0.044715x³))), in
// float64: the published formula cuBLASLt's GELU epilogues (and GPT-2)
// use.
func refGELU(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// The GELU epilogues: D = GELU(alpha·op(A)·op(B) + beta·C + bias), and with
// an aux buffer the GELU's input, in D's type with its own (padded)
// leading dimension. Both are checked against float64 references: the
// GELU is 1.13-Lipschitz, so an input within tol gives an output within
// 1.13·tol plus the fp32 evaluation of tanh.
func TestLtMatmulGELU(t *testing.T) {
	dev := mockDevice(t)
	_, h := newMockLt(t, dev)
	r := rand.New(rand.NewPCG(3, 5))
	cases := []gemmCase{
		{NoTrans, NoTrans, 5, 7, 3, 0, 1, 0},
		{Trans, NoTrans, 9, 4, 11, 2, 1.5, 0.5},
		{NoTrans, Trans, 16, 3, 13, 1, -1, 1},
	}
	for _, tc := range typeCombos() {
		for _, withBias := range []bool{false, true} {
			for _, withAux := range []bool{false, true} {
				for _, c := range cases {
					name := fmt.Sprintf("%s/bias=%v/aux=%v/%v", tc.name, withBias, withAux, c)
					t.Run(name, func(t *testing.T) {
						bf := tc.in == R16BF
						ar, ac := storedDims(c.ta, c.m, c.k)
						br, bc := storedDims(c.tb, c.k, c.n)
						a := newMat(r, ar, ac, leading(false, ar, ac, c.pad), false, bf)
						b := newMat(r, br, bc, leading(false, br, bc, c.pad), false, bf)
						cm := newMat(r, c.m, c.n, leading(false, c.m, c.n, c.pad), false, tc.out == R16BF)
						p := LtMatmul{TransA: c.ta, TransB: c.tb, M: c.m, N: c.n, K: c.k, Alpha: float32(c.alpha),
							Beta: float32(c.beta), GELU: true, Compute: Compute32F}
						var bias []float64
						if withBias {
							bm := newMat(r, c.m, 1, c.m, false, tc.out == R16BF)
							bias = bm.v
							p.Bias.Ptr, _, _ = uploadAs(t, dev, bias, tc.out)
							p.Bias.Type = tc.out
						}
						pre, tol := refGemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a, b, c.beta, cm, bias)
						out, outTol := make([]float64, len(pre)), make([]float64, len(pre))
						for i, x := range pre {
							out[i] = refGELU(x)
							outTol[i] = 1.13*tol[i] + 1e-6*(math.Abs(x)+1e-3)
						}
						var aux *deviceMat
						if withAux {
							ld := (c.m + 7) / 8 * 8 // a multiple of 8, padded past m when m is not
							aux = uploadMat(t, dev, newMat(r, c.m, c.n, ld, false, tc.out == R16BF), tc.out)
							p.Aux = aux.matrix()
						}
						da, db, dc := uploadMat(t, dev, a, tc.in), uploadMat(t, dev, b, tc.in), uploadMat(t, dev, cm, tc.out)
						p.A, p.B, p.C = da.matrix(), db.matrix(), dc.matrix()
						if err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(p) }); err != nil {
							t.Fatal(err)
						}
						dc.check(t, dev, out, outTol, c.m)
						if withAux {
							aux.check(t, dev, pre, tol, c.m)
						}
					})
				}
			}
		}
	}
}

// The bias's type reaches the library as CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
// the mock, which takes only a bias of D's type, set explicitly, refuses a
// fp32 bias for a bf16 result at the heuristic step, and the error says so.
func TestLtMatmulBiasDataType(t *testing.T) {
	dev := mockDevice(t)
	_, h := newMockLt(t, dev)
	r := rand.New(rand.NewPCG(1, 2))
	a := uploadMat(t, dev, newMat(r, 4, 3, 4, false, true), R16BF)
	b := uploadMat(t, dev, newMat(r, 3, 2, 3, false, true), R16BF)
	c := uploadMat(t, dev, newMat(r, 4, 2, 4, false, true), R16BF)
	bias, _, _ := uploadAs(t, dev, []float64{1, 2, 3, 4}, R32F)
	p := LtMatmul{TransA: NoTrans, TransB: NoTrans, M: 4, N: 2, K: 3, Alpha: 1, A: a.matrix(), B: b.matrix(),
		C: c.matrix(), Bias: Vector{bias, R32F}, Compute: Compute32F}
	err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(p) })
	if !IsStatus(err, StatusInvalidValue) || !strings.Contains(err.Error(), "cublasLtMatmulAlgoGetHeuristic") ||
		!strings.Contains(err.Error(), "epilogue BIAS") {
		t.Fatalf("fp32 bias on a bf16 result: %v, want CUBLAS_STATUS_INVALID_VALUE from the heuristic naming the epilogue", err)
	}
	// The same product with a bias of the result's type runs.
	bias16, _, _ := uploadAs(t, dev, []float64{1, 2, 3, 4}, R16BF)
	p.Bias = Vector{bias16, R16BF}
	if err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(p) }); err != nil {
		t.Fatalf("bf16 bias on a bf16 result: %v", err)
	}
}

// traceLines counts the lines of the mock's trace by their first word.
func traceLines(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			n[f[0]]++
		}
	}
	return n
}

// A handle makes a product shape's plan (descriptor, layouts, heuristic
// query) once and reuses it for every later product of that shape, with
// new pointers each time, as the mock's trace shows; another shape, or
// buffers less aligned than the plan's algorithm needs (the mock's
// algorithm refuses them), get a plan of their own. Every result is right.
func TestLtMatmulCachesPlans(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "lt.trace")
	t.Setenv(cudatest.EnvCUBLASLtTrace, trace)
	dev := mockDevice(t)
	_, h := newMockLt(t, dev)
	r := rand.New(rand.NewPCG(9, 9))
	run := func(m, n, k, offset int) {
		t.Helper()
		a, b := newMat(r, m, k, m, false, false), newMat(r, k, n, k, false, false)
		cm := newMat(r, m, n, m, false, false)
		bias := newMat(r, m, 1, m, false, false).v
		ref, tol := refGemm(NoTrans, NoTrans, m, n, k, 1, a, b, 0, cm, bias)
		// offset shifts every buffer by that many floats from its
		// 256-byte aligned allocation.
		pad := func(v []float64) []float64 { return append(make([]float64, offset), v...) }
		da := uploadMat(t, dev, mat{rows: m, cols: k, ld: m, v: pad(a.v)}, R32F)
		db := uploadMat(t, dev, mat{rows: k, cols: n, ld: k, v: pad(b.v)}, R32F)
		dc := uploadMat(t, dev, mat{rows: m, cols: n, ld: m, v: pad(cm.v)}, R32F)
		pb, _, _ := uploadAs(t, dev, pad(bias), R32F)
		at := func(x *deviceMat) Matrix { return Matrix{x.ptr.Add(4 * offset), R32F, x.ld} }
		p := LtMatmul{TransA: NoTrans, TransB: NoTrans, M: m, N: n, K: k, Alpha: 1, A: at(da), B: at(db), C: at(dc),
			Bias: Vector{pb.Add(4 * offset), R32F}, Compute: Compute32F}
		if err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(p) }); err != nil {
			t.Fatal(err)
		}
		got := download[float32](t, dev, dc.ptr.Add(4*offset), m*n)
		for i, g := range got {
			if math.Abs(float64(g)-ref[i]) > tol[i] {
				t.Fatalf("m=%d n=%d k=%d offset %d: C[%d] = %g, want %g", m, n, k, offset, i, g, ref[i])
			}
		}
	}
	want := func(plans, heuristics, matmuls int) {
		t.Helper()
		n := traceLines(t, trace)
		if n["desc_create"] != plans || n["heuristic"] != heuristics || n["matmul"] != matmuls || h.Plans() != plans {
			t.Errorf("after %d matmuls: %d descriptors, %d heuristic queries, %d matmuls traced, %d plans held; want %d, %d, %d, %d",
				matmuls, n["desc_create"], n["heuristic"], n["matmul"], h.Plans(), plans, heuristics, matmuls, plans)
		}
	}
	for i := 0; i < 5; i++ {
		run(6, 5, 4, 0)
	}
	want(1, 1, 5)
	run(7, 5, 4, 0)
	run(6, 5, 4, 0)
	want(2, 2, 7)
	// 4-byte aligned buffers: a plan whose algorithm takes them.
	run(6, 5, 4, 1)
	run(6, 5, 4, 1)
	want(3, 3, 9)
}

// The aux buffer's arguments are checked before the library sees them.
func TestLtMatmulAuxErrors(t *testing.T) {
	dev := mockDevice(t)
	_, h := newMockLt(t, dev)
	p := upload(t, dev, make([]float32, 256))
	m := Matrix{p, R32F, 8}
	base := LtMatmul{TransA: NoTrans, TransB: NoTrans, M: 8, N: 2, K: 2, Alpha: 1, A: m, B: m, C: m, GELU: true,
		Aux: m, Compute: Compute32F}
	for _, c := range []struct {
		name string
		edit func(*LtMatmul)
		want string
	}{
		{"aux without GELU", func(p *LtMatmul) { p.GELU = false }, "without the GELU"},
		{"aux ld not a multiple of 8", func(p *LtMatmul) { p.Aux.LD = 12 }, "multiple of 8"},
		{"aux ld short", func(p *LtMatmul) { p.M, p.C.LD, p.A.LD = 9, 9, 9 }, "at least M=9"},
		{"aux type", func(p *LtMatmul) { p.Aux.Type = R16BF }, "result's type"},
	} {
		q := base
		c.edit(&q)
		err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(q) })
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", c.name, err, c.want)
		}
	}
	if err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(base) }); err != nil {
		t.Errorf("valid GELU_AUX product: %v", err)
	}
}
