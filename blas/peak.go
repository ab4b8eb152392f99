package blas

import "time"

// peakSize is the square GEMM MeasurePeak times: large enough (2.1 GFLOP,
// 12 MiB of operands) for any library to reach its steady state, small
// enough for a fraction of a second on a laptop core.
const peakSize = 1024

// MeasurePeak returns the GFLOP/s impl sustains on a peakSize³ single
// precision GEMM, timing calls for about seconds (at least one call) after
// one untimed warm-up call. It is the sgemm roofline the trainer and
// `gotrain doctor` report; it allocates its own operands and blocks while
// it runs.
func MeasurePeak(impl Impl, seconds float64) (gflops float64) {
	const n = peakSize
	a := make([]float32, n*n)
	b := make([]float32, n*n)
	c := make([]float32, n*n)
	// Small, varied, normal values: zeros could hit shortcuts, denormals
	// slow paths.
	for i := range a {
		a[i] = float32(i%13-6) / 8
		b[i] = float32(i%7-3) / 4
	}
	impl.Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)

	budget := time.Duration(seconds * float64(time.Second))
	start := time.Now()
	calls := 0
	for {
		impl.Sgemm(false, false, n, n, n, 1, a, n, b, n, 0, c, n)
		calls++
		if time.Since(start) >= budget {
			break
		}
	}
	return 2 * float64(n) * n * n * float64(calls) / time.Since(start).Seconds() / 1e9
}
