//go:build !(goexperiment.simd && amd64)

package cpu

// Without the vector build, attention's row operations are the scalar
// loops of attention_math.go and its tile products the backend's GEMM.

func attRowMax(x []float32) float32                 { return attRowMaxScalar(x) }
func attExpShiftSum(x []float32, c float32) float32 { return attExpShiftSumScalar(x, c) }
func attExpShift(x []float32, c float32)            { attExpShiftScalar(x, c) }
func attScale(x []float32, a float32)               { attScaleScalar(x, a) }
func attScaleTo(dst, src []float32, a float32)      { attScaleToScalar(dst, src, a) }
func attDot(a, b []float32) float32                 { return attDotScalar(a, b) }
func attDS(ds, p []float32, dd float32)             { attDSScalar(ds, p, dd) }
func attAdd(dst, src []float32)                     { attAddScalar(dst, src) }

// attMul is a tile product on the backend's GEMM (see the vector build's
// attMul): C = alpha·op(A)·B + beta·C.
func (be *Backend) attMul(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	be.gemm.Sgemm(transA, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}
