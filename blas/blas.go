// Package blas owns CPU GEMM for gotrain: OpenBLAS (or any CBLAS) loaded at
// run time through csrc's dlopen loader, checked against a Go reference on
// load, and gotrain's own Go GEMM (package gogemm), the default and the
// fallback.
//
// All matrices are row-major float32. Arguments that do not describe a
// GEMM (negative sizes, leading dimensions smaller than a row, slices too
// short) are bugs in the calling package: every Impl panics on them with
// the same fixed "blas: ..." message, before any native code runs.
//
// Nothing here holds package-level state, but OpenBLAS itself is
// process-wide: its core type is fixed by the first Load and its thread
// count by the latest.
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
	Name     string // "go", "openblas" or "gonum"
	Library  string // the file loaded, if any
	CoreType string // OpenBLAS core type in use, as openblas_get_corename reports it, or the Go GEMM's kernel
	Threads  int
	Note     string // why a fallback happened, if one did

	// CoreTypeEnv is OPENBLAS_CORETYPE when Load ran, after any choice of
	// its own ("" means unset: OpenBLAS detected the CPU itself).
	CoreTypeEnv string
	// CoreTypeChosen is the value Load set from the CPU's features because
	// OPENBLAS_CORETYPE was unset ("" when it was preset or no choice fit).
	CoreTypeChosen string
	// Config is openblas_get_config(): version, build options, core.
	Config string
}
