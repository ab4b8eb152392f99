//go:build goexperiment.simd && amd64

package cpu

import (
	"simd/archsimd"

	"github.com/gotrain/gotrain/backend"
)

// expInPlace sets v[i] = exp32(v[i]), 16 lanes at a time on AVX-512. The
// vector loop performs exp32's operations in exp32's order, each rounded to
// float32 (no fused multiply-adds), and VSCALEFPS multiplies by 2^n exactly,
// so the results are bit-identical to the scalar loop (TestExpInPlace).
// The softmax of the cross-entropy runs V exps per row, which made the scalar
// loop the costliest op after the GEMMs.
func expInPlace(v []float32) {
	if !archsimd.X86.AVX512() {
		expInPlaceScalar(v)
		return
	}
	k := newExpConsts()
	i := 0
	// Four independent vectors an iteration: one exp is a chain of ~20
	// dependent operations, and four chains let the FP units overlap them
	// (1.1x on Zen 5, BenchmarkExpInPlace50304 best of 12: 0.365 → 0.318
	// ns/element). Each lane's result is the same.
	for ; i+64 <= len(v); i += 64 {
		e0 := k.exp(archsimd.LoadFloat32x16Slice(v[i:]))
		e1 := k.exp(archsimd.LoadFloat32x16Slice(v[i+16:]))
		e2 := k.exp(archsimd.LoadFloat32x16Slice(v[i+32:]))
		e3 := k.exp(archsimd.LoadFloat32x16Slice(v[i+48:]))
		e0.StoreSlice(v[i:])
		e1.StoreSlice(v[i+16:])
		e2.StoreSlice(v[i+32:])
		e3.StoreSlice(v[i+48:])
	}
	for ; i+16 <= len(v); i += 16 {
		k.exp(archsimd.LoadFloat32x16Slice(v[i:])).StoreSlice(v[i:])
	}
	archsimd.ClearAVXUpperBits()
	expInPlaceScalar(v[i:])
}

// expConsts are exp32's constants broadcast to 16 lanes.
type expConsts struct {
	maxA, minA, l2e, rnd, hi, lo, zero, one, c2, c3, c4, c5, c6, c7 archsimd.Float32x16
}

// newExpConsts returns the constants by value: a pointer result escapes
// to the heap (the function is too large to inline), one allocation per
// call of every row loop.
func newExpConsts() expConsts {
	b := archsimd.BroadcastFloat32x16
	return expConsts{
		maxA: b(expMaxArg), minA: b(expMinArg), l2e: b(log2e), rnd: b(expRound), hi: b(ln2Hi), lo: b(ln2Lo),
		zero: b(0), one: b(1), c2: b(1.0 / 2), c3: b(1.0 / 6), c4: b(1.0 / 24), c5: b(1.0 / 120),
		c6: b(1.0 / 720), c7: b(1.0 / 5040),
	}
}

// exp is exp32 on 16 lanes.
func (k *expConsts) exp(x archsimd.Float32x16) archsimd.Float32x16 {
	x = k.maxA.Merge(x, x.Greater(k.maxA)) // clamp above; NaN compares false and stays
	under := x.Less(k.minA)
	nf := x.Mul(k.l2e).Add(k.rnd).Sub(k.rnd)
	r := x.Sub(nf.Mul(k.hi)).Sub(nf.Mul(k.lo))
	p := r.Mul(k.c7).Add(k.c6)
	p = r.Mul(p).Add(k.c5)
	p = r.Mul(p).Add(k.c4)
	p = r.Mul(p).Add(k.c3)
	p = r.Mul(p).Add(k.c2)
	p = r.Mul(p).Add(k.one)
	p = r.Mul(p).Add(k.one)
	return k.zero.Merge(p.Scale(nf), under)
}

// softmaxRow sets p = softmax(x) and returns max(x) and Σe^(x−max), the sum
// accumulated in float64 lanes. It runs every pass of the row 16 lanes wide;
// the lanes' sums are added in a fixed order, so results are deterministic
// (they differ from the scalar build's only in the order of the float64 sum).
func softmaxRow(p, x []float32) (float32, float64) {
	m, sum := expRow(p, x)
	p = p[:len(x)]
	inv := float32(1 / sum)
	iv := archsimd.BroadcastFloat32x16(inv)
	i := 0
	if archsimd.X86.AVX512() {
		for ; i+16 <= len(p); i += 16 {
			archsimd.LoadFloat32x16Slice(p[i:]).Mul(iv).StoreSlice(p[i:])
		}
		archsimd.ClearAVXUpperBits()
	}
	for j := range p[i:] {
		p[i+j] *= inv
	}
	return m, sum
}

// expRow is softmaxRow without the normalisation: p = e^(x−max), unscaled,
// for a caller that scales p in a pass of its own.
func expRow(p, x []float32) (float32, float64) {
	n := len(x)
	if !archsimd.X86.AVX512() || n < 16 {
		return expRowScalar(p, x)
	}
	p = p[:n]
	mv := archsimd.LoadFloat32x16Slice(x)
	i := 16
	for ; i+16 <= n; i += 16 {
		mv = mv.Max(archsimd.LoadFloat32x16Slice(x[i:]))
	}
	return expRowFrom(p, x, maxLanes(mv, x[i:]))
}

// expRowBF16 is expRow on a bf16 row, widened in registers (exactly: a
// shift) in both passes, so it is bit-identical to expRow on the widened
// row without writing it: the classifier's logits are read as they are.
func expRowBF16(p []float32, x []uint16) (float32, float64) {
	n := len(x)
	p = p[:n]
	if !archsimd.X86.AVX512() || n < 16 {
		for i, h := range x {
			p[i] = backend.F32FromBF16(h)
		}
		return expRowScalar(p, p)
	}
	widen := func(i int) archsimd.Float32x16 {
		return archsimd.LoadUint16x16Slice(x[i:]).ExtendToUint32().ShiftAllLeft(16).AsFloat32x16()
	}
	mv := widen(0)
	i := 16
	for ; i+16 <= n; i += 16 {
		mv = mv.Max(widen(i))
	}
	var tail [16]float32
	for j, h := range x[i:] {
		tail[j] = backend.F32FromBF16(h)
	}
	m := maxLanes(mv, tail[:n-i])
	k := newExpConsts()
	mb := archsimd.BroadcastFloat32x16(m)
	var s0, s1 archsimd.Float64x8
	i = 0
	for ; i+64 <= n; i += 64 { // four exp chains at once, summed in row order (see expRowFrom)
		e0, e1 := k.exp(widen(i).Sub(mb)), k.exp(widen(i+16).Sub(mb))
		e2, e3 := k.exp(widen(i+32).Sub(mb)), k.exp(widen(i+48).Sub(mb))
		s0, s1 = addExp(s0, s1, e0, p[i:])
		s0, s1 = addExp(s0, s1, e1, p[i+16:])
		s0, s1 = addExp(s0, s1, e2, p[i+32:])
		s0, s1 = addExp(s0, s1, e3, p[i+48:])
	}
	for ; i+16 <= n; i += 16 {
		s0, s1 = addExp(s0, s1, k.exp(widen(i).Sub(mb)), p[i:])
	}
	return m, sumTail(s0, s1, p[i:], tail[:n-i], m)
}

// addExp stores e at p and adds its lanes to the float64 sums: the low
// eight to s0, the high eight to s1.
func addExp(s0, s1 archsimd.Float64x8, e archsimd.Float32x16, p []float32) (archsimd.Float64x8, archsimd.Float64x8) {
	e.StoreSlice(p)
	return s0.Add(e.GetLo().ConvertToFloat64()), s1.Add(e.GetHi().ConvertToFloat64())
}

// maxLanes is the largest of mv's lanes and rest's values, found as the
// scalar loop finds it (NaNs never win a comparison).
func maxLanes(mv archsimd.Float32x16, rest []float32) float32 {
	var lanes [16]float32
	mv.Store(&lanes)
	archsimd.ClearAVXUpperBits()
	m := lanes[0]
	for _, v := range lanes[1:] {
		if v > m {
			m = v
		}
	}
	for _, v := range rest {
		if v > m {
			m = v
		}
	}
	return m
}

// expRowFrom is expRow's exp pass, given the row's max m.
func expRowFrom(p, x []float32, m float32) (float32, float64) {
	n := len(x)
	k := newExpConsts()
	mb := archsimd.BroadcastFloat32x16(m)
	var s0, s1 archsimd.Float64x8
	i := 0
	// Four exp chains at once (as in expInPlace); the sums still take the
	// vectors in row order, so the result is the one-at-a-time loop's.
	for ; i+64 <= n; i += 64 {
		e0 := k.exp(archsimd.LoadFloat32x16Slice(x[i:]).Sub(mb))
		e1 := k.exp(archsimd.LoadFloat32x16Slice(x[i+16:]).Sub(mb))
		e2 := k.exp(archsimd.LoadFloat32x16Slice(x[i+32:]).Sub(mb))
		e3 := k.exp(archsimd.LoadFloat32x16Slice(x[i+48:]).Sub(mb))
		s0, s1 = addExp(s0, s1, e0, p[i:])
		s0, s1 = addExp(s0, s1, e1, p[i+16:])
		s0, s1 = addExp(s0, s1, e2, p[i+32:])
		s0, s1 = addExp(s0, s1, e3, p[i+48:])
	}
	for ; i+16 <= n; i += 16 {
		s0, s1 = addExp(s0, s1, k.exp(archsimd.LoadFloat32x16Slice(x[i:]).Sub(mb)), p[i:])
	}
	return m, sumTail(s0, s1, p[i:], x[i:], m)
}

// sumTail adds the lane sums s0 and s1 in a fixed order, then sets the
// row's last len(x) < 16 values p = e^(x−m) with the scalar exp and adds
// them.
func sumTail(s0, s1 archsimd.Float64x8, p, x []float32, m float32) float64 {
	var d0, d1 [8]float64
	s0.Store(&d0)
	s1.Store(&d1)
	archsimd.ClearAVXUpperBits()
	var sum float64
	for j := range d0 {
		sum += d0[j] + d1[j]
	}
	p = p[:len(x)]
	for j, v := range x {
		p[j] = v - m
	}
	expInPlaceScalar(p)
	for _, e := range p {
		sum += float64(e)
	}
	return sum
}

// VectorMath says which softmax/exp loops run: "avx512" in a GOEXPERIMENT=simd
// build on an AVX-512 CPU, else "scalar". `gotrain doctor` reports it.
func VectorMath() string {
	if archsimd.X86.AVX512() {
		return "avx512"
	}
	return "scalar"
}
