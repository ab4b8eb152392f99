package blas

// peakSize is the square GEMM MeasurePeak times: large enough (2.1 GFLOP,
// 12 MiB of operands) for any library to reach its steady state, small
// enough for a fraction of a second on a laptop core.
const peakSize = 1024

// MeasurePeak returns the GFLOP/s impl sustains on a peakSize³ single
// precision GEMM, timing calls for about seconds (at least one call) after
// one untimed warm-up call. It allocates its own operands and blocks while
// it runs. Where the shapes a run uses are known, MeasureRoofline on them
// is the fairer roofline.
func MeasurePeak(impl Impl, seconds float64) (gflops float64) {
	return measureShape(impl, SquareShape, seconds)
}
