package gogemm

import (
	"math/rand/v2"
	"testing"
)

func benchShape(b *testing.B, g *Gemm, transA, transB bool, m, n, k int) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, m*k)
	w := make([]float32, n*k)
	out := make([]float32, m*n)
	for i := range x {
		x[i] = rng.Float32() - 0.5
	}
	for i := range w {
		w[i] = rng.Float32() - 0.5
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	calls := 0
	for b.Loop() {
		g.Sgemm(transA, transB, m, n, k, 1, x, lda, w, ldb, 0, out, n)
		calls++
	}
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(calls)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkKernel1(b *testing.B) { benchShape(b, New(1), false, true, 2048, 768, 256) }
func BenchmarkKernel2(b *testing.B) { benchShape(b, New(2), false, true, 2048, 768, 256) }
func BenchmarkSquare1(b *testing.B) { benchShape(b, New(1), false, false, 1024, 1024, 1024) }

func benchBF16(b *testing.B, g *Gemm, transA, transB bool, m, n, k int) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]uint16, m*k)
	w := make([]uint16, n*k)
	out := make([]float32, m*n)
	for i := range x {
		x[i] = toBF16(rng.Float32() - 0.5)
	}
	for i := range w {
		w[i] = toBF16(rng.Float32() - 0.5)
	}
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	calls := 0
	for b.Loop() {
		g.Bgemm(transA, transB, m, n, k, 1, x, lda, w, ldb, 0, out, n)
		calls++
	}
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(calls)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func widening(g *Gemm) *Gemm { g.bkern = nil; return g }

func BenchmarkBF16Kernel1(b *testing.B) { benchBF16(b, New(1), false, true, 2048, 768, 256) }
func BenchmarkBF16Kernel2(b *testing.B) { benchBF16(b, New(2), false, true, 2048, 768, 256) }
func BenchmarkBF16Widen1(b *testing.B) {
	benchBF16(b, widening(New(1)), false, true, 2048, 768, 256)
}
func BenchmarkBF16Square1(b *testing.B) { benchBF16(b, New(1), false, false, 1024, 1024, 1024) }

// The three products of gpt2-tiny's fc layer (N 2048, C 256, OC 1024), in
// fp32 and bf16: forward (NT), dX (NN) and dW (TN).
func BenchmarkFcFwd(b *testing.B)     { benchShape(b, New(0), false, true, 2048, 1024, 256) }
func BenchmarkFcFwdBF16(b *testing.B) { benchBF16(b, New(0), false, true, 2048, 1024, 256) }
func BenchmarkFcDX(b *testing.B)      { benchShape(b, New(0), false, false, 2048, 256, 1024) }
func BenchmarkFcDXBF16(b *testing.B)  { benchBF16(b, New(0), false, false, 2048, 256, 1024) }
func BenchmarkFcDW(b *testing.B)      { benchShape(b, New(0), true, false, 1024, 256, 2048) }
func BenchmarkFcDWBF16(b *testing.B)  { benchBF16(b, New(0), true, false, 1024, 256, 2048) }

// The tied classifier of gpt2-tiny (N 2048, C 256, V 50304), 80% of the
// model's FLOPs: forward (NT), dX (NN) and dW (TN), fp32 and bf16.
func BenchmarkHeadFwd(b *testing.B)     { benchShape(b, New(0), false, true, 2048, 50304, 256) }
func BenchmarkHeadFwdBF16(b *testing.B) { benchBF16(b, New(0), false, true, 2048, 50304, 256) }
func BenchmarkHeadDX(b *testing.B)      { benchShape(b, New(0), false, false, 2048, 256, 50304) }
func BenchmarkHeadDXBF16(b *testing.B)  { benchBF16(b, New(0), false, false, 2048, 256, 50304) }
func BenchmarkHeadDW(b *testing.B)      { benchShape(b, New(0), true, false, 50304, 256, 2048) }
func BenchmarkHeadDWBF16(b *testing.B)  { benchBF16(b, New(0), true, false, 50304, 256, 2048) }
