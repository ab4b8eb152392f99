package blas

import (
	"math"
	"testing"
)

// TestBF16ThroughRecorder: the Go GEMM's bf16 path is reachable through a
// Recorder, computes what Sgemm computes on the widened operands, and is
// tallied as a bf16 shape; an Impl without one (here a counting stub) has
// none, so its callers widen.
func TestBF16ThroughRecorder(t *testing.T) {
	if AsBF16(&countingImpl{calls: map[Shape]int{}}) != nil {
		t.Fatal("AsBF16 found a bf16 GEMM in an Impl without one")
	}
	g := NewGo(1)
	rec := NewRecorder(g)
	bi := AsBF16(rec)
	if bi == nil {
		t.Fatal("AsBF16 does not see the Go GEMM through a Recorder")
	}
	m, n, k := 5, 7, 9
	a16, b16 := make([]uint16, m*k), make([]uint16, n*k)
	a32, b32 := make([]float32, m*k), make([]float32, n*k)
	for i := range a16 {
		a32[i] = float32(i%11-5) / 4 // exact in bf16
		a16[i] = uint16(math.Float32bits(a32[i]) >> 16)
	}
	for i := range b16 {
		b32[i] = float32(i%5-2) / 2
		b16[i] = uint16(math.Float32bits(b32[i]) >> 16)
	}
	got, want := make([]float32, m*n), make([]float32, m*n)
	for i := range got {
		got[i], want[i] = float32(i), float32(i)
	}
	bi.Bgemm(false, true, m, n, k, 0.5, a16, k, b16, k, 2, got, n)
	g.Sgemm(false, true, m, n, k, 0.5, a32, k, b32, k, 2, want, n)
	for i := range got {
		if got[i] != want[i] { // small exact values: no rounding at all
			t.Fatalf("C[%d] = %g, Sgemm on the widened operands %g", i, got[i], want[i])
		}
	}
	if top := rec.Top(2); len(top) != 1 || top[0] != (Shape{TransB: true, M: m, N: n, K: k, BF16: true}) {
		t.Fatalf("recorded %v, want one bf16 shape", top)
	}
	// k = 0: C = beta·C without reading A or B, as Sgemm.
	bi.Bgemm(false, false, m, n, 0, 1, nil, 1, nil, n, 0.5, got, n)
	if got[3] != want[3]/2 {
		t.Fatalf("k=0: C[3] = %g, want %g", got[3], want[3]/2)
	}
	defer func() {
		if r := recover(); r != msgShortA {
			t.Fatalf("a short A: recovered %v, want %q", r, msgShortA)
		}
	}()
	bi.Bgemm(false, false, m, n, k, 1, a16[:3], k, b16, n, 0, got, n)
}

// TestRooflineOfBF16Shapes: a bf16 shape's roofline is timed with the bf16
// GEMM, which the Go GEMM has, and gives a rate.
func TestRooflineOfBF16Shapes(t *testing.T) {
	s := Shape{TransB: true, M: 48, N: 64, K: 40, BF16: true}
	if g, best := MeasureRoofline(NewGo(1), []Shape{s}, 0.005); g <= 0 || best != s {
		t.Fatalf("MeasureRoofline = %g at %v", g, best)
	}
}
