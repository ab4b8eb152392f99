package blas

import (
	"math"
	"os"
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

// TestBgemmRoundThroughRecorder: where the Go GEMM rounds bf16 products
// itself (AVX512_BF16), a Recorder passes BgemmRound through, tallies the
// shape and writes the bf16 of what Bgemm computes plus the bias; a k too
// deep for one pass is declined, untallied and unwritten, and a short bias
// is a caller bug.
func TestBgemmRoundThroughRecorder(t *testing.T) {
	g := NewGo(2)
	rec := NewRecorder(g)
	r, ok := AsBF16(rec).(BF16Rounder)
	if !ok {
		t.Fatal("a Recorder over the Go GEMM hides BgemmRound")
	}
	m, n, k := 30, 70, 40
	a16, b16 := make([]uint16, m*k), make([]uint16, n*k)
	for i := range a16 {
		a16[i] = uint16(math.Float32bits(float32(i%11-5)/4) >> 16)
	}
	for i := range b16 {
		b16[i] = uint16(math.Float32bits(float32(i%5-2)/2) >> 16)
	}
	bias := make([]float32, n)
	for j := range bias {
		bias[j] = float32(j%7) - 3
	}
	got := make([]uint16, m*n)
	if !r.BgemmRound(false, true, m, n, k, 1, a16, k, b16, k, bias, got, n) {
		if g.NativeBF16() {
			t.Fatal("BgemmRound declined a one-pass product on a CPU with the bf16 kernel")
		}
		if os.Getenv(envRequireAVX512) != "" {
			t.Fatalf("$%s is set but the CPU is detected without AVX512_BF16", envRequireAVX512)
		}
		t.Skip("no AVX512_BF16: BgemmRound declines")
	}
	want := make([]float32, m*n)
	for i := range m {
		copy(want[i*n:], bias)
	}
	g.Bgemm(false, true, m, n, k, 1, a16, k, b16, k, 1, want, n)
	for i := range got {
		// Small exact values: the fp32 result is a bf16 already.
		if w := uint16(math.Float32bits(want[i]) >> 16); got[i] != w {
			t.Fatalf("C[%d] = %#04x, Bgemm plus bias %#04x (%g)", i, got[i], w, want[i])
		}
	}
	if top := rec.Top(2); len(top) != 1 || top[0] != (Shape{TransB: true, M: m, N: n, K: k, BF16: true}) {
		t.Fatalf("recorded %v, want one bf16 shape", top)
	}
	deep := 2000
	if r.BgemmRound(false, true, 1, 1, deep, 1, make([]uint16, deep), deep, make([]uint16, deep), deep, nil, got[:1], 1) {
		t.Fatalf("BgemmRound took k = %d, deeper than one pass", deep)
	}
	if len(rec.Top(3)) != 1 {
		t.Fatal("a declined BgemmRound was tallied")
	}
	defer func() {
		if p := recover(); p != msgShortBias {
			t.Fatalf("a short bias: recovered %v, want %q", p, msgShortBias)
		}
	}()
	r.BgemmRound(false, true, m, n, k, 1, a16, k, b16, k, bias[:3], got, n)
}
