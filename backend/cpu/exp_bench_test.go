package cpu

import "testing"

// BenchmarkExpInPlace50304 times one vocabulary row of exps, the softmax's
// inner loop, in the build's implementation (see expVectorized).
func BenchmarkExpInPlace50304(b *testing.B) {
	src := make([]float32, 50304)
	for i := range src {
		src[i] = float32(i%977) * -0.01
	}
	v := make([]float32, len(src))
	b.SetBytes(int64(4 * len(v)))
	for range b.N {
		copy(v, src)
		expInPlace(v)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(v)), "ns/elem")
	b.Logf("exp implementation: %s", VectorMath())
}

// BenchmarkExpRow50304 times the classifier's softmax pass over one
// vocabulary row: the max, then e^(x−max) stored and summed in float64.
func BenchmarkExpRow50304(b *testing.B) {
	x := make([]float32, 50304)
	for i := range x {
		x[i] = float32(i%977) * -0.01
	}
	p := make([]float32, len(x))
	b.SetBytes(int64(4 * len(x)))
	for range b.N {
		expRow(p, x)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(x)), "ns/elem")
}
