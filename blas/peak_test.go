package blas

import (
	"sync"
	"testing"
	"time"
)

// sleepy takes a fixed time per GEMM and records the shapes it was given.
type sleepy struct {
	per   time.Duration
	calls *int
	bad   *bool
}

func (s sleepy) Info() Info { return Info{Name: "sleepy"} }

func (s sleepy) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if transA || transB || m != peakSize || n != peakSize || k != peakSize || lda != peakSize || ldb != peakSize || ldc != peakSize ||
		len(a) < peakSize*peakSize || len(b) < peakSize*peakSize || len(c) < peakSize*peakSize {
		*s.bad = true
	}
	*s.calls++
	time.Sleep(s.per)
}

// TestMeasurePeakArithmetic checks MeasurePeak's FLOP count and timing
// against a GEMM that takes at least 20 ms: it can never report more than
// 2·1024³ FLOP per 20 ms, and it must time at least one call.
func TestMeasurePeakArithmetic(t *testing.T) {
	calls, bad := 0, false
	s := sleepy{per: 20 * time.Millisecond, calls: &calls, bad: &bad}
	g := MeasurePeak(s, 0.05)
	ceiling := 2 * float64(peakSize*peakSize*peakSize) / 0.020 / 1e9
	if !(g > 0 && g <= ceiling) {
		t.Errorf("MeasurePeak = %g GFLOP/s, want in (0, %g]", g, ceiling)
	}
	if calls < 2 || bad {
		t.Errorf("calls = %d (want warm-up + at least 1), bad arguments = %v", calls, bad)
	}
}

// countingImpl counts its calls by shape and computes nothing.
type countingImpl struct {
	mu    sync.Mutex
	calls map[Shape]int
}

func (c *countingImpl) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, cc []float32, ldc int) {
	checkSgemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(cc), ldc)
	c.mu.Lock()
	c.calls[Shape{TransA: transA, TransB: transB, M: m, N: n, K: k}]++
	c.mu.Unlock()
}
func (c *countingImpl) Info() Info { return Info{Name: "counting"} }

// TestRooflineUsesTheGivenGEMM: the roofline is measured by calling the
// Impl it is given, on exactly the recorded shapes, which the Recorder
// ranks by the FLOPs the step spent on them.
func TestRooflineUsesTheGivenGEMM(t *testing.T) {
	inner := &countingImpl{calls: map[Shape]int{}}
	rec := NewRecorder(inner)
	big := Shape{TransB: true, M: 64, N: 96, K: 32}
	small := Shape{TransA: true, M: 8, N: 8, K: 8}
	for range 3 {
		rec.Sgemm(big.TransA, big.TransB, big.M, big.N, big.K, 1, make([]float32, 64*32), 32, make([]float32, 96*32), 32, 0, make([]float32, 64*96), 96)
	}
	rec.Sgemm(small.TransA, small.TransB, 8, 8, 8, 1, make([]float32, 64), 8, make([]float32, 64), 8, 0, make([]float32, 64), 8)
	if inner.calls[big] != 3 || inner.calls[small] != 1 {
		t.Fatalf("the recorder did not pass calls through: %v", inner.calls)
	}
	if top := rec.Top(5); len(top) != 2 || top[0] != big || top[1] != small {
		t.Fatalf("Top = %v, want [%v %v]", top, big, small)
	}
	if top := rec.Top(1); len(top) != 1 || top[0] != big {
		t.Fatalf("Top(1) = %v", top)
	}
	counted := &countingImpl{calls: map[Shape]int{}}
	g, best := MeasureRoofline(counted, rec.Top(2), 0.01)
	if counted.calls[big] < 2 || counted.calls[small] < 2 || len(counted.calls) != 2 {
		t.Errorf("MeasureRoofline called %v, want the two recorded shapes (warm-up and timed)", counted.calls)
	}
	if g <= 0 || (best != big && best != small) {
		t.Errorf("MeasureRoofline = %g at %v", g, best)
	}
}
