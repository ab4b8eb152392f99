//go:build goexperiment.simd && amd64

package cpu

import "simd/archsimd"

// Attention's row operations 16 lanes wide. Each falls back to the scalar
// loop without AVX-512 or for rows shorter than a vector; a row's last
// len%16 elements take the scalar loop too. Lane sums are added in a fixed
// order, so results are deterministic.

func attRowMax(x []float32) float32 {
	n := len(x)
	if !archsimd.X86.AVX512() || n < 16 {
		return attRowMaxScalar(x)
	}
	mv := archsimd.LoadFloat32x16Slice(x)
	i := 16
	for ; i+16 <= n; i += 16 {
		mv = mv.Max(archsimd.LoadFloat32x16Slice(x[i:]))
	}
	if i < n { // the last 16, overlapping: a maximum may count an element twice
		mv = mv.Max(archsimd.LoadFloat32x16Slice(x[n-16:]))
	}
	var lanes [16]float32
	mv.Store(&lanes)
	return attRowMaxScalar(lanes[:])
}

func attExpShiftSum(x []float32, c float32) float32 {
	if !archsimd.X86.AVX512() || len(x) < 16 {
		return attExpShiftSumScalar(x, c)
	}
	k := newExpConsts()
	cv := archsimd.BroadcastFloat32x16(c)
	var acc archsimd.Float32x16
	i := 0
	for ; i+16 <= len(x); i += 16 {
		e := k.exp(archsimd.LoadFloat32x16Slice(x[i:]).Sub(cv))
		e.StoreSlice(x[i:])
		acc = acc.Add(e)
	}
	var lanes [16]float32
	acc.Store(&lanes)
	var s float32
	for _, v := range lanes {
		s += v
	}
	return s + attExpShiftSumScalar(x[i:], c)
}

func attExpShift(x []float32, c float32) {
	if !archsimd.X86.AVX512() {
		attExpShiftScalar(x, c)
		return
	}
	k := newExpConsts()
	cv := archsimd.BroadcastFloat32x16(c)
	i := 0
	for ; i+16 <= len(x); i += 16 {
		k.exp(archsimd.LoadFloat32x16Slice(x[i:]).Sub(cv)).StoreSlice(x[i:])
	}
	attExpShiftScalar(x[i:], c)
}

func attScale(x []float32, a float32) {
	attScaleTo(x, x, a)
}

func attScaleTo(dst, src []float32, a float32) {
	if !archsimd.X86.AVX512() {
		attScaleToScalar(dst, src, a)
		return
	}
	dst = dst[:len(src)]
	av := archsimd.BroadcastFloat32x16(a)
	i := 0
	for ; i+16 <= len(src); i += 16 {
		archsimd.LoadFloat32x16Slice(src[i:]).Mul(av).StoreSlice(dst[i:])
	}
	attScaleToScalar(dst[i:], src[i:], a)
}

func attDot(a, b []float32) float32 {
	if !archsimd.X86.AVX512() || len(a) < 16 {
		return attDotScalar(a, b)
	}
	b = b[:len(a)]
	var acc archsimd.Float32x16
	i := 0
	for ; i+16 <= len(a); i += 16 {
		acc = archsimd.LoadFloat32x16Slice(a[i:]).MulAdd(archsimd.LoadFloat32x16Slice(b[i:]), acc)
	}
	var lanes [16]float32
	acc.Store(&lanes)
	var s float32
	for _, v := range lanes {
		s += v
	}
	return s + attDotScalar(a[i:], b[i:])
}

func attDS(ds, p []float32, dd float32) {
	if !archsimd.X86.AVX512() {
		attDSScalar(ds, p, dd)
		return
	}
	p = p[:len(ds)]
	dv := archsimd.BroadcastFloat32x16(dd)
	i := 0
	for ; i+16 <= len(ds); i += 16 {
		archsimd.LoadFloat32x16Slice(p[i:]).Mul(archsimd.LoadFloat32x16Slice(ds[i:]).Sub(dv)).StoreSlice(ds[i:])
	}
	attDSScalar(ds[i:], p[i:], dd)
}

func attAdd(dst, src []float32) {
	if !archsimd.X86.AVX512() {
		attAddScalar(dst, src)
		return
	}
	dst = dst[:len(src)]
	i := 0
	for ; i+16 <= len(src); i += 16 {
		archsimd.LoadFloat32x16Slice(dst[i:]).Add(archsimd.LoadFloat32x16Slice(src[i:])).StoreSlice(dst[i:])
	}
	attAddScalar(dst[i:], src[i:])
}
