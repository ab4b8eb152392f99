package blas

import "github.com/gotrain/gotrain/blas/gogemm"

// Go is gotrain's own GEMM (package gogemm): packed panels, an AVX-512
// micro-kernel where the CPU has it, split over goroutines. It needs no
// native library. Safe for concurrent use.
type Go struct {
	g *gogemm.Gemm
}

var _ Impl = (*Go)(nil)

// NewGo returns the Go GEMM splitting large products over threads
// goroutines (0: GOMAXPROCS).
func NewGo(threads int) *Go { return &Go{g: gogemm.New(threads)} }

// Sgemm implements Impl.
func (o *Go) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if sgemmTrivial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	o.g.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Info implements Impl.
func (o *Go) Info() Info {
	// The bf16 kernel is named too: doctor and bench then say whether bf16
	// GEMMs run VDPBF16PS or widen.
	return Info{Name: "go", Threads: o.g.Threads(), CoreType: o.g.Kernel() + "; bf16: " + o.g.BF16Kernel()}
}

// fallbackGo is the Go GEMM standing in for OpenBLAS that could not be
// used; its Info carries the reason.
type fallbackGo struct {
	*Go
	note string
}

// Info implements Impl.
func (f fallbackGo) Info() Info {
	info := f.Go.Info()
	info.Note = f.note
	return info
}
