package cpu

// The row operations of attention's tiles, in scalar Go. On AVX-512 with a
// GOEXPERIMENT=simd build, attention_simd_amd64.go runs them 16 lanes wide
// (sums then come in another order); attention_generic.go maps them here
// elsewhere. They are not fused into the GEMMs: at T = 256 the tile GEMMs
// take most of the time, and these loops are a few passes over a tile that
// is in L1.

func attRowMaxScalar(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// attExpShiftSumScalar sets x[i] = e^(x[i]−c) and returns Σ x[i].
func attExpShiftSumScalar(x []float32, c float32) float32 {
	attExpShiftScalar(x, c)
	var s float32
	for _, e := range x {
		s += e
	}
	return s
}

func attExpShiftScalar(x []float32, c float32) {
	for i := range x {
		x[i] -= c
	}
	expInPlaceScalar(x)
}

func attScaleScalar(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

func attScaleToScalar(dst, src []float32, a float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = v * a
	}
}

func attDotScalar(a, b []float32) float32 {
	b = b[:len(a)]
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// attDSScalar sets ds[i] = p[i]·(ds[i] − dd): the score gradient from dP
// (held in ds) and D = dd.
func attDSScalar(ds, p []float32, dd float32) {
	p = p[:len(ds)]
	for i, v := range ds {
		ds[i] = p[i] * (v - dd)
	}
}

func attAddScalar(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] += v
	}
}
