//go:build !(goexperiment.simd && amd64)

package cpu

import "github.com/gotrain/gotrain/backend"

// expInPlace sets v[i] = exp32(v[i]). Builds without GOEXPERIMENT=simd (or
// not on amd64) run the scalar loop; exp_simd_amd64.go has the vector one.
func expInPlace(v []float32) { expInPlaceScalar(v) }

// softmaxRow sets p = softmax(x) and returns max(x) and Σe^(x−max).
func softmaxRow(p, x []float32) (float32, float64) { return softmaxRowScalar(p, x) }

// expRowBF16 is softmaxRow without the normalisation (p = e^(x−max)), on a
// bf16 row widened into p first.
func expRowBF16(p []float32, x []uint16) (float32, float64) {
	p = p[:len(x)]
	for i, h := range x {
		p[i] = backend.F32FromBF16(h)
	}
	return expRowScalar(p, p)
}

// expRow is softmaxRow without the normalisation: p = e^(x−max).
func expRow(p, x []float32) (float32, float64) { return expRowScalar(p, x) }

// VectorMath says which softmax/exp loops run: "avx512" in a GOEXPERIMENT=simd
// build on an AVX-512 CPU, else "scalar". `gotrain doctor` reports it.
func VectorMath() string { return "scalar" }
