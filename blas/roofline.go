package blas

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"
)

// Shape is one GEMM's transposes and sizes: C(M×N) = op(A)(M×K)·op(B)(K×N).
type Shape struct {
	TransA, TransB bool
	M, N, K        int
	BF16           bool // bf16 operands (Bgemm), fp32 otherwise
}

// Flops is the shape's floating-point operation count, 2·M·N·K.
func (s Shape) Flops() float64 { return 2 * float64(s.M) * float64(s.N) * float64(s.K) }

// SquareShape is the 1024³ product MeasurePeak times.
var SquareShape = Shape{M: peakSize, N: peakSize, K: peakSize}

// Recorder is an Impl that runs another and tallies the FLOPs it spent on
// each distinct shape, so a roofline can be measured on the shapes a
// training step really runs. Safe for concurrent use.
type Recorder struct {
	Impl
	mu    sync.Mutex
	flops map[Shape]float64
}

// NewRecorder wraps impl.
func NewRecorder(impl Impl) *Recorder {
	return &Recorder{Impl: impl, flops: map[Shape]float64{}}
}

// Sgemm implements Impl.
func (r *Recorder) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.add(Shape{TransA: transA, TransB: transB, M: m, N: n, K: k})
	r.Impl.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

func (r *Recorder) add(s Shape) {
	r.mu.Lock()
	r.flops[s] += s.Flops()
	r.mu.Unlock()
}

// Top returns up to n recorded shapes, those that took the most FLOPs
// first (ties in a fixed order).
func (r *Recorder) Top(n int) []Shape {
	r.mu.Lock()
	defer r.mu.Unlock()
	shapes := make([]Shape, 0, len(r.flops))
	for s := range r.flops {
		shapes = append(shapes, s)
	}
	slices.SortFunc(shapes, func(a, b Shape) int {
		if c := cmp.Compare(r.flops[b], r.flops[a]); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.M, b.M), cmp.Compare(a.N, b.N), cmp.Compare(a.K, b.K),
			boolCmp(a.TransA, b.TransA), boolCmp(a.TransB, b.TransB), boolCmp(a.BF16, b.BF16))
	})
	return shapes[:min(n, len(shapes))]
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// MeasureRoofline returns the highest GFLOP/s impl sustains over shapes,
// and the shape that reached it: each shape gets an equal share of about
// seconds, after one untimed warm-up call. It is the roofline MFU is
// taken against: the GEMM actually used, on the shapes actually run, so
// a step whose every FLOP were a GEMM at that rate would be 100%.
func MeasureRoofline(impl Impl, shapes []Shape, seconds float64) (gflops float64, best Shape) {
	for _, s := range shapes {
		if g := measureShape(impl, s, seconds/float64(len(shapes))); g > gflops {
			gflops, best = g, s
		}
	}
	return gflops, best
}

// measureShape times impl on s for about seconds (at least one call).
func measureShape(impl Impl, s Shape, seconds float64) float64 {
	rowsA, colsA := s.M, s.K
	if s.TransA {
		rowsA, colsA = s.K, s.M
	}
	rowsB, colsB := s.K, s.N
	if s.TransB {
		rowsB, colsB = s.N, s.K
	}
	a := make([]float32, rowsA*colsA)
	b := make([]float32, rowsB*colsB)
	c := make([]float32, s.M*s.N)
	// Small, varied, normal values: zeros could hit shortcuts, denormals
	// slow paths.
	for i := range a {
		a[i] = float32(i%13-6) / 8
	}
	for i := range b {
		b[i] = float32(i%7-3) / 4
	}
	call := func() {
		impl.Sgemm(s.TransA, s.TransB, s.M, s.N, s.K, 1, a, max(1, colsA), b, max(1, colsB), 0, c, max(1, s.N))
	}
	if bi := AsBF16(impl); s.BF16 && bi != nil {
		// A bf16 shape runs at the bf16 GEMM's rate: the values above are
		// exact in bf16.
		a16, b16 := make([]uint16, len(a)), make([]uint16, len(b))
		for i, v := range a {
			a16[i] = uint16(math.Float32bits(v) >> 16)
		}
		for i, v := range b {
			b16[i] = uint16(math.Float32bits(v) >> 16)
		}
		call = func() {
			bi.Bgemm(s.TransA, s.TransB, s.M, s.N, s.K, 1, a16, max(1, colsA), b16, max(1, colsB), 0, c, max(1, s.N))
		}
	}
	call()
	budget := time.Duration(seconds * float64(time.Second))
	start := time.Now()
	calls := 0
	for {
		call()
		calls++
		if time.Since(start) >= budget {
			break
		}
	}
	return s.Flops() * float64(calls) / time.Since(start).Seconds() / 1e9
}
