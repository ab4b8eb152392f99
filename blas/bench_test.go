package blas

import (
	"math/rand/v2"
	"testing"
)

// benchSgemm times C(m×n) = A(m×k)·Bᵀ with B stored n×k: the layout of a
// linear layer's forward pass (weights stored out×in, as llm.c does).
func benchSgemm(b *testing.B, impl Impl, m, n, k int) {
	if impl == nil {
		b.Skip("OpenBLAS not available")
	}
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
	calls := 0
	for b.Loop() {
		impl.Sgemm(false, true, m, n, k, 1, x, k, w, k, 0, out, n)
		calls++
	}
	b.ReportMetric(2*float64(m)*float64(n)*float64(k)*float64(calls)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// gpt2-tiny shapes (B·T = 2048, C = 256, 4C = 1024, 3C = 768, padded V = 50304).

func BenchmarkSgemmOpenBLASM2048N768K256(b *testing.B) {
	benchSgemm(b, loadOpenBLAS(b, 0), 2048, 768, 256)
}
func BenchmarkSgemmOpenBLASM2048N256K256(b *testing.B) {
	benchSgemm(b, loadOpenBLAS(b, 0), 2048, 256, 256)
}
func BenchmarkSgemmOpenBLASM2048N1024K256(b *testing.B) {
	benchSgemm(b, loadOpenBLAS(b, 0), 2048, 1024, 256)
}
func BenchmarkSgemmOpenBLASM2048N256K1024(b *testing.B) {
	benchSgemm(b, loadOpenBLAS(b, 0), 2048, 256, 1024)
}
func BenchmarkSgemmOpenBLASM2048N50304K256(b *testing.B) {
	benchSgemm(b, loadOpenBLAS(b, 0), 2048, 50304, 256)
}

func BenchmarkSgemmGonumM2048N768K256(b *testing.B)   { benchSgemm(b, Gonum{}, 2048, 768, 256) }
func BenchmarkSgemmGonumM2048N256K256(b *testing.B)   { benchSgemm(b, Gonum{}, 2048, 256, 256) }
func BenchmarkSgemmGonumM2048N1024K256(b *testing.B)  { benchSgemm(b, Gonum{}, 2048, 1024, 256) }
func BenchmarkSgemmGonumM2048N256K1024(b *testing.B)  { benchSgemm(b, Gonum{}, 2048, 256, 1024) }
func BenchmarkSgemmGonumM2048N50304K256(b *testing.B) { benchSgemm(b, Gonum{}, 2048, 50304, 256) }

// BenchmarkMeasurePeakOpenBLAS reports what `gotrain doctor` would print.
func BenchmarkMeasurePeakOpenBLAS(b *testing.B) {
	impl := loadOpenBLAS(b, 0)
	if impl == nil {
		b.Skip("OpenBLAS not available")
	}
	var g float64
	for b.Loop() {
		g = MeasurePeak(impl, 0.5)
	}
	b.ReportMetric(g, "GFLOP/s")
}
