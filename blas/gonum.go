package blas

import (
	"runtime"

	gblas "gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Gonum is the pure-Go fallback GEMM.
type Gonum struct{}

var _ Impl = Gonum{}

// Sgemm implements Impl.
func (Gonum) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
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
