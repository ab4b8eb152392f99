//go:build goexperiment.simd && amd64

package cpu

import (
	"simd/archsimd"

	"github.com/gotrain/gotrain/backend"
)

// Every kernel below ends its vector part with ClearAVXUpperBits
// (VZEROUPPER): the compiler's scalar float code is SSE, and after
// AVX-512 code leaves the upper register halves dirty each SSE instruction
// waits on them, which made the scalar loops of a bf16 LayerNormForward,
// run after vload, 3.4× slower (2.35 ms against 0.69 for fp32 at N 2048
// C 256).
//
// The decoder ops' row kernels, 16 lanes at a time on AVX-512, with the
// scalar loops (in the ops' files) for other CPUs and for the tails. The
// elementwise kernels perform the scalar loops' operations in their order,
// each rounded to float32 (no fused multiply-adds), so they are
// bit-identical to them; the float64 sums add 16 lane sums in a fixed order
// (TestDecoderKernels). These ops are memory-bound: the vector loops exist
// so that the arithmetic, exp above all, stays below the memory time.

// sumSquares returns Σx² accumulated in float64 lanes.
func sumSquares(x []float32) float64 {
	if !archsimd.X86.AVX512() || len(x) < 16 {
		return sumSquaresScalar(x)
	}
	var s0, s1 archsimd.Float64x8
	i := 0
	for ; i+16 <= len(x); i += 16 {
		v := archsimd.LoadFloat32x16Slice(x[i:])
		lo, hi := v.GetLo().ConvertToFloat64(), v.GetHi().ConvertToFloat64()
		s0 = lo.MulAdd(lo, s0)
		s1 = hi.MulAdd(hi, s1)
	}
	return addLanes(s0, s1) + sumSquaresScalar(x[i:])
}

// addLanes is the sum of a's and b's lanes, added pairwise in a fixed
// order.
func addLanes(a, b archsimd.Float64x8) float64 {
	s := a.Add(b)
	q := s.GetLo().Add(s.GetHi())
	r := q.GetLo().Add(q.GetHi())
	lo, hi := r.GetElem(0), r.GetElem(1)
	archsimd.ClearAVXUpperBits()
	return lo + hi
}

// addRow sets o = x + y.
func addRow(o, x, y []float32) {
	n := len(o)
	x, y = x[:n], y[:n]
	i := 0
	if archsimd.X86.AVX512() {
		for ; i+16 <= n; i += 16 {
			archsimd.LoadFloat32x16Slice(x[i:]).Add(archsimd.LoadFloat32x16Slice(y[i:])).StoreSlice(o[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	addRowScalar(o[i:], x[i:], y[i:])
}

// vload is v.load with BF16 widened 16 lanes at a time (exactly: a shift).
func (v fview) vload(off, n int, tmp []float32) []float32 {
	if v.dt != backend.BF16 || !archsimd.X86.AVX512() {
		return v.load(off, n, tmp)
	}
	src, dst := v.u16[off:off+n], tmp[:n:n]
	i := 0
	for ; i+16 <= n; i += 16 {
		archsimd.LoadUint16x16Slice(src[i:]).ExtendToUint32().ShiftAllLeft(16).AsFloat32x16().StoreSlice(dst[i:])
	}
	for ; i < n; i++ {
		dst[i] = backend.F32FromBF16(src[i])
	}
	archsimd.ClearAVXUpperBits()
	return dst
}

// vstore is v.store with BF16 rounded 16 lanes at a time by
// backend.BF16FromF32's integer method (round to nearest even, NaN kept
// quiet), so the bits are the same as the scalar store's (TestDecoderKernels).
// Subnormals round like normals here, unlike AVX512-BF16's VCVTNEPS2BF16,
// which flushes them.
func (v fview) vstore(off int, s []float32) {
	if v.dt != backend.BF16 || !archsimd.X86.AVX512() {
		v.store(off, s)
		return
	}
	dst := v.u16[off : off+len(s)]
	k := newBF16Round()
	i := 0
	for ; i+16 <= len(s); i += 16 {
		k.round(archsimd.LoadFloat32x16Slice(s[i:])).StoreSlice(dst[i:])
	}
	for ; i < len(s); i++ {
		dst[i] = backend.BF16FromF32(s[i])
	}
	archsimd.ClearAVXUpperBits()
}

// bf16Round holds the constants of BF16FromF32's integer rounding.
type bf16Round struct{ bias, one, quiet archsimd.Uint32x16 }

func newBF16Round() bf16Round {
	return bf16Round{archsimd.BroadcastUint32x16(0x7fff), archsimd.BroadcastUint32x16(1), archsimd.BroadcastUint32x16(0x0040)}
}

// round is backend.BF16FromF32 on 16 lanes.
func (k *bf16Round) round(x archsimd.Float32x16) archsimd.Uint16x16 {
	u := x.AsUint32x16()
	hi := u.ShiftAllRight(16)
	r := u.Add(k.bias).Add(hi.And(k.one)).ShiftAllRight(16)
	return hi.Or(k.quiet).Merge(r, x.IsNaN()).TruncateToUint16()
}

// vstoreScaled is v.storeScaled with BF16 scaled and rounded 16 lanes at
// a time, bit-identical to it.
func (v fview) vstoreScaled(off int, x []float32, a, b float32) {
	if v.dt != backend.BF16 || !archsimd.X86.AVX512() {
		v.storeScaled(off, x, a, b)
		return
	}
	dst := v.u16[off : off+len(x)]
	k := newBF16Round()
	va, vb := archsimd.BroadcastFloat32x16(a), archsimd.BroadcastFloat32x16(b)
	i := 0
	for ; i+16 <= len(x); i += 16 {
		k.round(archsimd.LoadFloat32x16Slice(x[i:]).Mul(va).Mul(vb)).StoreSlice(dst[i:])
	}
	archsimd.ClearAVXUpperBits()
	v.storeScaled(off+i, x[i:], a, b)
}

// scaleRow sets o = x·a·b, each product rounded.
func scaleRow(o, x []float32, a, b float32) {
	n := len(o)
	x = x[:n]
	i := 0
	if archsimd.X86.AVX512() {
		va, vb := archsimd.BroadcastFloat32x16(a), archsimd.BroadcastFloat32x16(b)
		for ; i+16 <= n; i += 16 {
			archsimd.LoadFloat32x16Slice(x[i:]).Mul(va).Mul(vb).StoreSlice(o[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	scaleRowScalar(o[i:], x[i:], a, b)
}

// scaleMul sets o = x·s·w.
func scaleMul(o, x, w []float32, s float32) {
	n := len(o)
	x, w = x[:n], w[:n]
	i := 0
	if archsimd.X86.AVX512() {
		vs := archsimd.BroadcastFloat32x16(s)
		for ; i+16 <= n; i += 16 {
			xv := archsimd.LoadFloat32x16Slice(x[i:])
			xv.Mul(vs).Mul(archsimd.LoadFloat32x16Slice(w[i:])).StoreSlice(o[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	scaleMulScalar(o[i:], x[i:], w[i:], s)
}

// rmsNormBackwardRow is rmsNormBackwardRowScalar 16 lanes wide.
func rmsNormBackwardRow(o, pw, x, d, w []float32, s float32) {
	n := len(o)
	if !archsimd.X86.AVX512() || n < 16 {
		rmsNormBackwardRowScalar(o, pw, x, d, w, s)
		return
	}
	x, d, w, pw = x[:n], d[:n], w[:n], pw[:n]
	vs := archsimd.BroadcastFloat32x16(s)
	var s0, s1 archsimd.Float64x8
	i := 0
	for ; i+16 <= n; i += 16 {
		g := archsimd.LoadFloat32x16Slice(w[i:]).Mul(archsimd.LoadFloat32x16Slice(d[i:]))
		nv := archsimd.LoadFloat32x16Slice(x[i:]).Mul(vs)
		s0 = g.GetLo().ConvertToFloat64().MulAdd(nv.GetLo().ConvertToFloat64(), s0)
		s1 = g.GetHi().ConvertToFloat64().MulAdd(nv.GetHi().ConvertToFloat64(), s1)
	}
	dot := addLanes(s0, s1)
	for j := i; j < n; j++ {
		dot += float64(w[j]*d[j]) * float64(x[j]*s)
	}
	m := float32(dot / float64(n))
	vm := archsimd.BroadcastFloat32x16(m)
	i = 0
	for ; i+16 <= n; i += 16 {
		dv := archsimd.LoadFloat32x16Slice(d[i:])
		nv := archsimd.LoadFloat32x16Slice(x[i:]).Mul(vs)
		archsimd.LoadFloat32x16Slice(pw[i:]).Add(dv.Mul(nv)).StoreSlice(pw[i:])
		g := archsimd.LoadFloat32x16Slice(w[i:]).Mul(dv)
		vs.Mul(g.Sub(nv.Mul(vm))).StoreSlice(o[i:])
	}
	archsimd.ClearAVXUpperBits()
	for j := i; j < n; j++ {
		nj := x[j] * s
		pw[j] += d[j] * nj
		o[j] = s * (w[j]*d[j] - nj*m)
	}
}

// rotateHalf is rotateHalfScalar 16 pairs at a time. o may be x: each
// block of pairs is loaded before it is stored.
func rotateHalf(o, x, c, s []float32) {
	h := len(c)
	j := 0
	if archsimd.X86.AVX512() {
		lo, hi, olo, ohi := x[:h], x[h:2*h], o[:h], o[h:2*h]
		for ; j+16 <= h; j += 16 {
			a, b := archsimd.LoadFloat32x16Slice(lo[j:]), archsimd.LoadFloat32x16Slice(hi[j:])
			cv, sv := archsimd.LoadFloat32x16Slice(c[j:]), archsimd.LoadFloat32x16Slice(s[j:])
			a.Mul(cv).Sub(b.Mul(sv)).StoreSlice(olo[j:])
			b.Mul(cv).Add(a.Mul(sv)).StoreSlice(ohi[j:])
		}
	}
	archsimd.ClearAVXUpperBits()
	rotateHalfScalar(o, x, c, s, j)
}

// unrotateHalf is unrotateHalfScalar 16 pairs at a time. o may be x.
func unrotateHalf(o, x, c, s []float32) {
	h := len(c)
	j := 0
	if archsimd.X86.AVX512() {
		lo, hi, olo, ohi := x[:h], x[h:2*h], o[:h], o[h:2*h]
		for ; j+16 <= h; j += 16 {
			a, b := archsimd.LoadFloat32x16Slice(lo[j:]), archsimd.LoadFloat32x16Slice(hi[j:])
			cv, sv := archsimd.LoadFloat32x16Slice(c[j:]), archsimd.LoadFloat32x16Slice(s[j:])
			a.Mul(cv).Add(b.Mul(sv)).StoreSlice(olo[j:])
			b.Mul(cv).Sub(a.Mul(sv)).StoreSlice(ohi[j:])
		}
	}
	archsimd.ClearAVXUpperBits()
	unrotateHalfScalar(o, x, c, s, j)
}

// siluMul is siluMulScalar with the exp computed in registers (no pass
// through e).
func siluMul(o, g, u, e []float32) {
	n := len(o)
	g, u = g[:n], u[:n]
	i := 0
	if archsimd.X86.AVX512() {
		k := newExpConsts()
		neg := archsimd.BroadcastFloat32x16(-1)
		for ; i+16 <= n; i += 16 {
			gv := archsimd.LoadFloat32x16Slice(g[i:])
			ev := k.exp(gv.Mul(neg))
			gv.Div(k.one.Add(ev)).Mul(archsimd.LoadFloat32x16Slice(u[i:])).StoreSlice(o[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	siluMulScalar(o[i:], g[i:], u[i:], e)
}

// siluMulBackward is siluMulBackwardScalar with the exp in registers.
func siluMulBackward(dg, du, d, g, u, e []float32) {
	n := len(dg)
	du, d, g, u = du[:n], d[:n], g[:n], u[:n]
	i := 0
	if archsimd.X86.AVX512() {
		k := newExpConsts()
		neg := archsimd.BroadcastFloat32x16(-1)
		for ; i+16 <= n; i += 16 {
			gv := archsimd.LoadFloat32x16Slice(g[i:])
			ev := k.exp(gv.Mul(neg))
			sg := k.one.Div(k.one.Add(ev))
			es := ev.Mul(sg)
			dv := archsimd.LoadFloat32x16Slice(d[i:])
			dv.Mul(gv.Mul(sg)).StoreSlice(du[i:])
			dv.Mul(archsimd.LoadFloat32x16Slice(u[i:])).Mul(sg.Mul(k.one.Add(gv.Mul(es)))).StoreSlice(dg[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	siluMulBackwardScalar(dg[i:], du[i:], d[i:], g[i:], u[i:], e)
}

// geluRow is geluRowScalar with the exp in registers (no pass through e),
// its operations in the scalar order.
func geluRow(o, x, e []float32) {
	n := len(x)
	o = o[:n]
	i := 0
	if archsimd.X86.AVX512() {
		k := newExpConsts()
		a, c := archsimd.BroadcastFloat32x16(geluA), archsimd.BroadcastFloat32x16(-2*geluK)
		for ; i+16 <= n; i += 16 {
			xv := archsimd.LoadFloat32x16Slice(x[i:])
			ev := k.exp(c.Mul(xv.Add(a.Mul(xv).Mul(xv).Mul(xv))))
			xv.Div(k.one.Add(ev)).StoreSlice(o[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	geluRowScalar(o[i:], x[i:], e)
}

// geluBackwardRow is geluBackwardRowScalar with the exp in registers.
func geluBackwardRow(o, x, g, e []float32) {
	n := len(x)
	o, g = o[:n], g[:n]
	i := 0
	if archsimd.X86.AVX512() {
		k := newExpConsts()
		a, c := archsimd.BroadcastFloat32x16(geluA), archsimd.BroadcastFloat32x16(-2*geluK)
		a3, gk, two := archsimd.BroadcastFloat32x16(3*geluA), archsimd.BroadcastFloat32x16(geluK), archsimd.BroadcastFloat32x16(2)
		for ; i+16 <= n; i += 16 {
			xv := archsimd.LoadFloat32x16Slice(x[i:])
			ev := k.exp(c.Mul(xv.Add(a.Mul(xv).Mul(xv).Mul(xv))))
			du := gk.Mul(k.one.Add(a3.Mul(xv).Mul(xv)))
			sg := k.one.Div(k.one.Add(ev))
			t := two.Mul(xv).Mul(du).Mul(ev.Mul(sg)).Mul(sg)
			sg.Add(t).Mul(archsimd.LoadFloat32x16Slice(g[i:])).StoreSlice(o[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	geluBackwardRowScalar(o[i:], x[i:], g[i:], e)
}

// adamwRow is adamwRowScalar 16 lanes at a time, its operations in the
// scalar order (VSQRTPS is the correctly rounded square root).
func adamwRow(w, g, mm, vm []float32, c adamwConsts) {
	n := len(w)
	g, mm, vm = g[:n], mm[:n], vm[:n]
	i := 0
	if archsimd.X86.AVX512() {
		b := archsimd.BroadcastFloat32x16
		b1, b2, nb1, nb2 := b(c.b1), b(c.b2), b(1-c.b1), b(1-c.b2)
		bc1, bc2, lr, eps, wd, gs := b(c.bc1), b(c.bc2), b(c.lr), b(c.eps), b(c.wd), b(c.gs)
		for ; i+16 <= n; i += 16 {
			gi := archsimd.LoadFloat32x16Slice(g[i:]).Mul(gs)
			mi := b1.Mul(archsimd.LoadFloat32x16Slice(mm[i:])).Add(nb1.Mul(gi))
			vi := b2.Mul(archsimd.LoadFloat32x16Slice(vm[i:])).Add(nb2.Mul(gi).Mul(gi))
			mi.StoreSlice(mm[i:])
			vi.StoreSlice(vm[i:])
			wv := archsimd.LoadFloat32x16Slice(w[i:])
			upd := mi.Div(bc1).Div(vi.Div(bc2).Sqrt().Add(eps)).Add(wd.Mul(wv))
			wv.Sub(lr.Mul(upd)).StoreSlice(w[i:])
		}
	}
	archsimd.ClearAVXUpperBits()
	adamwRowScalar(w[i:], g[i:], mm[i:], vm[i:], c)
}
