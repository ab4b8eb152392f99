//go:build goexperiment.simd && amd64

package cpu

import (
	"math"
	"math/rand/v2"
	"simd/archsimd"
	"testing"
)

// attGemm against a float64 triple loop on every path of its blocking: row
// counts around its 4-row blocks, column counts around its 32- and 16-wide
// blocks (a head size of 5 is one partial vector), both layouts of A,
// leading dimensions wider than the matrices, and alpha/beta as the tiles
// use them (beta 0 must not read C, which holds NaN then).
func TestAttGemmMatchesFloat64(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("no AVX-512: attGemm is not used")
	}
	r := rand.New(rand.NewPCG(5, 8))
	for _, m := range []int{1, 3, 4, 7, 64} {
		for _, n := range []int{1, 5, 16, 17, 32, 45, 64} {
			for _, k := range []int{1, 6, 64} {
				for _, transA := range []bool{false, true} {
					for _, ab := range [][2]float32{{1, 0}, {0.125, 1}, {-2, 0.5}} {
						alpha, beta := ab[0], ab[1]
						lda, ldb, ldc := k+3, n+2, n+5
						if transA {
							lda = m + 3
						}
						a := make([]float32, max(m, k)*lda)
						b := make([]float32, k*ldb)
						c := make([]float32, m*ldc)
						for _, s := range [][]float32{a, b, c} {
							for i := range s {
								s[i] = float32(r.NormFloat64())
							}
						}
						if beta == 0 {
							for i := range c {
								c[i] = float32(math.NaN())
							}
						}
						want := make([]float64, m*n)
						for i := range m {
							for j := range n {
								s := 0.0
								for p := range k {
									ai := a[i*lda+p]
									if transA {
										ai = a[p*lda+i]
									}
									s += float64(ai) * float64(b[p*ldb+j])
								}
								want[i*n+j] = float64(alpha) * s
								if beta != 0 {
									want[i*n+j] += float64(beta) * float64(c[i*ldc+j])
								}
							}
						}
						attGemm(transA, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
						for i := range m {
							for j := range n {
								got, w := float64(c[i*ldc+j]), want[i*n+j]
								if !(math.Abs(got-w) <= 1e-5*(math.Sqrt(float64(k))+math.Abs(w))) {
									t.Fatalf("m%d n%d k%d transA=%v alpha %g beta %g: C[%d,%d] = %g, want %g", m, n, k, transA, alpha, beta, i, j, got, w)
								}
							}
							for j := n; j < ldc; j++ { // the gap between rows is untouched
								if beta == 0 && !math.IsNaN(float64(c[i*ldc+j])) {
									t.Fatalf("m%d n%d k%d: C[%d,%d] past the row written", m, n, k, i, j)
								}
							}
						}
					}
				}
			}
		}
	}
}
