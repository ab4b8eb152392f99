package blas

import (
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
