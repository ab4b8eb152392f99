package blas

import (
	"runtime"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Gonum is gonum's pure-Go GEMM, kept for comparison and tests; the Go
// GEMM (NewGo) replaced it as the fallback, being about 10× faster. It parallelises large products over
// goroutines itself and is safe for concurrent use.
type Gonum struct{}

var _ Impl = Gonum{}

// Sgemm implements Impl.
func (Gonum) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if sgemmTrivial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	ta, tb := gblas.NoTrans, gblas.NoTrans
	if transA {
		ta = gblas.Trans
	}
	if transB {
		tb = gblas.Trans
	}
	gonum.Implementation{}.Sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Info implements Impl.
func (Gonum) Info() Info { return Info{Name: "gonum", Threads: runtime.GOMAXPROCS(0)} }
