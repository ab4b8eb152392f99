package blas

import (
	"fmt"
	"math"
)

// referenceSgemm computes C = alpha·op(A)·op(B) + beta·C in float64, straight
// from the definition, for checking faster GEMMs. It returns the m×n result
// densely (row stride n) and, per element, the magnitude
// |alpha|·Σ_p |op(A)_ip·op(B)_pj| + |beta·C_ij| that float32 rounding
// error is proportional to. As in BLAS, C is not read when beta is 0 and
// A and B are not read when alpha is 0 or k is 0.
func referenceSgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) (want, mag []float64) {
	want = make([]float64, m*n)
	mag = make([]float64, m*n)
	at := func(i, p int) float64 {
		if transA {
			return float64(a[p*lda+i])
		}
		return float64(a[i*lda+p])
	}
	bt := func(p, j int) float64 {
		if transB {
			return float64(b[j*ldb+p])
		}
		return float64(b[p*ldb+j])
	}
	for i := range m {
		for j := range n {
			var sum, abs float64
			if alpha != 0 {
				for p := range k {
					x := at(i, p) * bt(p, j)
					sum += x
					abs += math.Abs(x)
				}
			}
			v := float64(alpha) * sum
			s := math.Abs(float64(alpha)) * abs
			if beta != 0 {
				cij := float64(beta) * float64(c[i*ldc+j])
				v += cij
				s += math.Abs(cij)
			}
			want[i*n+j] = v
			mag[i*n+j] = s
		}
	}
	return want, mag
}

// unitRoundoff32 is float32's unit roundoff, 2⁻²⁴.
const unitRoundoff32 = 1.0 / (1 << 24)

// sgemmTolerance bounds the float32 error of one element of a GEMM with
// inner dimension k: the classic dot-product bound γ(k+2)·mag, doubled for
// the rounding of alpha, beta and the float32 inputs' products.
func sgemmTolerance(k int, mag float64) float64 {
	return 2 * float64(k+2) * unitRoundoff32 * mag
}

// compareSgemm checks the m×n result in got (leading dimension ldc) against
// referenceSgemm's want and mag, and reports the first element out of
// tolerance. NaN or Inf in got is always a mismatch.
func compareSgemm(got []float32, ldc, m, n, k int, want, mag []float64) error {
	for i := range m {
		for j := range n {
			g := float64(got[i*ldc+j])
			w := want[i*n+j]
			tol := sgemmTolerance(k, mag[i*n+j])
			if !(math.Abs(g-w) <= tol) {
				return fmt.Errorf("C[%d,%d] = %g, want %g (tolerance %.3g)", i, j, g, w, tol)
			}
		}
	}
	return nil
}
