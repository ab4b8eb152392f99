package blas

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
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

// modelShape is one GEMM of a model's training step, as the CPU backend
// calls it: forward out = x·Wᵀ (N×OC, K = C), dX = dY·W (N×C, K = OC),
// dW += dYᵀ·X (OC×C, K = N).
type modelShape struct {
	name    string
	ta, tb  bool
	m, n, k int
}

// linearShapes lists forward, dX and dW for a linear layer of C inputs and
// OC outputs over N rows.
func linearShapes(prefix string, N, C, OC int) []modelShape {
	return []modelShape{
		{prefix + "/fwd", false, true, N, OC, C},
		{prefix + "/dX", false, false, N, C, OC},
		{prefix + "/dW", true, false, OC, C, N},
	}
}

// modelShapes: gpt2-tiny (C 256, B·T 2048, padded V 50304; the LM head in
// 512-row chunks, as model/decoder.go runs it), gpt2 (C 768, B·T 1024) and
// qwen3-tiny (C 256, 4 heads and 2 KV heads of 64, FF 768, padded V 151936,
// B·T 2048), plus attention's 64³ tile.
func modelShapes() []modelShape {
	var s []modelShape
	s = append(s, linearShapes("gpt2-tiny/qkv", 2048, 256, 768)...)
	s = append(s, linearShapes("gpt2-tiny/proj", 2048, 256, 256)...)
	s = append(s, linearShapes("gpt2-tiny/fc", 2048, 256, 1024)...)
	s = append(s, linearShapes("gpt2-tiny/fcproj", 2048, 1024, 256)...)
	s = append(s, linearShapes("gpt2-tiny/head", 512, 256, 50304)...)
	s = append(s, linearShapes("gpt2/qkv", 1024, 768, 2304)...)
	s = append(s, linearShapes("gpt2/fc", 1024, 768, 3072)...)
	s = append(s, linearShapes("gpt2/fcproj", 1024, 3072, 768)...)
	s = append(s, linearShapes("qwen3-tiny/qkv", 2048, 256, 512)...)
	s = append(s, linearShapes("qwen3-tiny/up", 2048, 256, 1536)...)
	s = append(s, linearShapes("qwen3-tiny/down", 2048, 768, 256)...)
	s = append(s, linearShapes("qwen3-tiny/head", 256, 256, 151936)...)
	s = append(s, modelShape{"attention/tile", false, false, 64, 64, 64})
	return s
}

// BenchmarkModelShapes times OpenBLAS and the Go GEMM on every model
// shape, interleaved (OpenBLAS, Go, OpenBLAS, …) so load from other work
// on a shared machine hits both alike, and reports each one's median
// GFLOP/s over the rounds and Go's share of OpenBLAS's.
func BenchmarkModelShapes(b *testing.B) {
	threads := 0
	ob := loadOpenBLAS(b, threads)
	goImpl := NewGo(threads)
	for _, s := range modelShapes() {
		b.Run(s.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			rowsA, colsA := s.m, s.k
			if s.ta {
				rowsA, colsA = s.k, s.m
			}
			rowsB, colsB := s.k, s.n
			if s.tb {
				rowsB, colsB = s.n, s.k
			}
			x := make([]float32, rowsA*colsA)
			w := make([]float32, rowsB*colsB)
			out := make([]float32, s.m*s.n)
			for i := range x {
				x[i] = rng.Float32() - 0.5
			}
			for i := range w {
				w[i] = rng.Float32() - 0.5
			}
			flop := 2 * float64(s.m) * float64(s.n) * float64(s.k)
			// Enough calls per timing for about 20 ms of work at 50 GFLOP/s.
			reps := max(1, int(1e9/flop))
			rate := func(impl Impl) float64 {
				start := time.Now()
				for range reps {
					impl.Sgemm(s.ta, s.tb, s.m, s.n, s.k, 1, x, colsA, w, colsB, 0, out, s.n)
				}
				return flop * float64(reps) / time.Since(start).Seconds() / 1e9
			}
			var obRates, goRates []float64
			for b.Loop() {
				if ob != nil {
					obRates = append(obRates, rate(ob))
				}
				goRates = append(goRates, rate(goImpl))
			}
			g := median(goRates)
			b.ReportMetric(g, "go-GFLOP/s")
			if ob != nil {
				o := median(obRates)
				b.ReportMetric(o, "openblas-GFLOP/s")
				b.ReportMetric(100*g/o, "go/openblas-%")
			}
		})
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	slices.Sort(s)
	return s[len(s)/2]
}
