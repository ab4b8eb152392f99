// Package blas owns CPU GEMM for gotrain: OpenBLAS (or any CBLAS) loaded at
// run time through csrc's dlopen loader, checked against a Go reference on
// load, with gonum's pure-Go GEMM as the fallback.
//
// All matrices are row-major float32.
package blas

// Impl computes single-precision GEMMs. Implementations are safe for
// concurrent use.
type Impl interface {
	// Sgemm computes C = alpha·op(A)·op(B) + beta·C where op(X) is X or Xᵀ,
	// op(A) is m×k, op(B) is k×n and C is m×n, all row-major with leading
	// dimensions lda, ldb, ldc.
	Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
	// Info describes the implementation for `gotrain doctor`.
	Info() Info
}

// Info says which GEMM runs.
type Info struct {
	Name     string // "openblas" or "gonum"
	Library  string // the file loaded, if any
	CoreType string // OpenBLAS core type in use
	Threads  int
	Note     string // why a fallback happened, if one did
}
