package gogemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refGemm is C = alpha·op(A)·op(B) + beta·C in float64, the independent
// reference every kernel is checked against. With beta = 0, C is not read.
func refGemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) []float64 {
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += float64(av) * float64(bv)
			}
			v := float64(alpha) * s
			if beta != 0 {
				v += float64(beta) * float64(c[i*ldc+j])
			}
			out[i*n+j] = v
		}
	}
	return out
}

// gemmCase is one conformance case: shape, transposes, extra leading
// dimension (pad), slice offsets (off, in floats: unaligned starts) and
// alpha/beta.
type gemmCase struct {
	ta, tb      bool
	m, n, k     int
	pad, off    int
	alpha, beta float32
}

func (tc gemmCase) String() string {
	return fmt.Sprintf("ta=%t tb=%t %dx%dx%d pad=%d off=%d alpha=%g beta=%g", tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.pad, tc.off, tc.alpha, tc.beta)
}

// check runs one case on g and compares every element of C, and the
// padding around it, with the reference.
func check(t *testing.T, g *Gemm, tc gemmCase, rng *rand.Rand) {
	t.Helper()
	rowsA, colsA := tc.m, tc.k
	if tc.ta {
		rowsA, colsA = tc.k, tc.m
	}
	rowsB, colsB := tc.k, tc.n
	if tc.tb {
		rowsB, colsB = tc.n, tc.k
	}
	lda, ldb, ldc := colsA+tc.pad, colsB+tc.pad, tc.n+tc.pad
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = rng.Float32()*2 - 1
		}
		return s
	}
	a := fill(tc.off + rowsA*lda)[tc.off:]
	b := fill(tc.off + rowsB*ldb)[tc.off:]
	c := fill(tc.off + tc.m*ldc)[tc.off:]
	if tc.beta == 0 {
		// BLAS semantics: beta = 0 overwrites, so NaN in C must vanish.
		for i := range tc.m {
			for j := range tc.n {
				c[i*ldc+j] = float32(math.NaN())
			}
		}
	}
	orig := append([]float32(nil), c...)
	want := refGemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
	g.Sgemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
	// fp32 accumulation of k products of magnitude ≤ 1: the error bound
	// grows with k (sequential sums, a few ulps per add).
	tol := 1e-6 * float64(tc.k+4) * 4
	for i := range tc.m {
		for j := range ldc {
			got := c[i*ldc+j]
			if j >= tc.n {
				if got != orig[i*ldc+j] {
					t.Fatalf("%v (%s): padding C[%d][%d] changed from %g to %g", tc, g.Kernel(), i, j, orig[i*ldc+j], got)
				}
				continue
			}
			w := want[i*tc.n+j]
			if d := math.Abs(float64(got) - w); !(d <= tol*(1+math.Abs(w))) {
				t.Fatalf("%v (%s): C[%d][%d] = %g, want %g (|diff| %g)", tc, g.Kernel(), i, j, got, w, d)
			}
		}
	}
}

// gemms is every kernel and thread count a build can run.
func gemms() []*Gemm {
	return []*Gemm{New(1), New(2), New(3), NewGeneric(1), NewGeneric(2)}
}

// TestConformanceOddShapes: every transpose combination over shapes that
// are not multiples of any tile (1..67 on each side, k across the KC
// boundary), unaligned slice starts, leading dimensions wider than a row,
// overwrite over NaN, accumulate, and general alpha/beta.
func TestConformanceOddShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sizes := []int{1, 2, 5, 11, 12, 13, 31, 32, 33, 47, 64, 67}
	for _, g := range gemms() {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for it := range 40 {
					tc := gemmCase{ta: ta, tb: tb,
						m: sizes[rng.IntN(len(sizes))], n: sizes[rng.IntN(len(sizes))], k: sizes[rng.IntN(len(sizes))],
						pad: []int{0, 3}[it%2], off: it % 5,
						alpha: []float32{1, -0.75, 1.25}[it%3], beta: []float32{0, 1, -0.5}[(it/3)%3]}
					check(t, g, tc, rng)
				}
			}
		}
	}
}

// TestConformanceBlocks crosses the KC, MC and NC block edges and the
// parallel split (big enough to run on several goroutines).
func TestConformanceBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	cases := []gemmCase{
		{m: 130, n: 1100, k: 300, alpha: 1, beta: 1},
		{ta: true, m: 257, n: 67, k: 513, pad: 1, off: 3, alpha: 0.5, beta: 0},
		{tb: true, m: 200, n: 1057, k: 260, off: 1, alpha: 1, beta: 0},
		{ta: true, tb: true, m: 97, n: 129, k: 600, pad: 2, alpha: -1, beta: 2},
	}
	for _, g := range []*Gemm{New(1), New(2), NewGeneric(2)} {
		for _, tc := range cases {
			check(t, g, tc, rng)
		}
	}
}

// TestDeterministic: the split over goroutines depends only on the shape
// and thread count, so two runs give bit-identical results.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	m, n, k := 300, 700, 400
	a := make([]float32, m*k)
	b := make([]float32, k*n)
	for i := range a {
		a[i] = rng.Float32() - 0.5
	}
	for i := range b {
		b[i] = rng.Float32() - 0.5
	}
	g := New(2)
	c1 := make([]float32, m*n)
	c2 := make([]float32, m*n)
	g.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c1, n)
	g.Sgemm(false, false, m, n, k, 1, a, k, b, n, 0, c2, n)
	for i := range c1 {
		if math.Float32bits(c1[i]) != math.Float32bits(c2[i]) {
			t.Fatalf("C[%d]: %g then %g", i, c1[i], c2[i])
		}
	}
}
