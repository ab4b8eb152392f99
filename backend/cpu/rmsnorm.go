package cpu

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

var _ backend.DecoderOps = (*Backend)(nil)

// RMSNormForward implements backend.DecoderOps, in parallel over rows. The
// sum of squares runs in float64, as LayerNorm's moments do: a float32 sum
// over C = 4096 may lose 2e-4 relative (C·2^-24), and the widening is
// free next to the memory traffic.
func (be *Backend) RMSNormForward(out, rstd, inp, weight backend.Buffer, N, C int, eps float32) {
	const op = "RMSNormForward"
	checkLen(op, "out", out, N*C)
	checkLen(op, "rstd", rstd, N)
	checkLen(op, "inp", inp, N*C)
	checkLen(op, "weight", weight, C)
	rv := f32s(op, rstd)
	ov, iv, wv := floatView(op, out), floatView(op, inp), floatView(op, weight)
	be.parallel(N, rowGrain(C), func(_, lo, hi int) {
		otmp, itmp := ov.tmp(C), iv.tmp(C)
		w := wv.vload(0, C, wv.tmp(C))
		for r := lo; r < hi; r++ {
			x := iv.vload(r*C, C, itmp)
			rv[r] = rmsNormRow(ov, r*C, otmp, x, w, eps)
		}
	})
}

// rmsNormRow normalises the fp32 row x into v at off (through tmp on the
// 16-bit paths) and returns its rstd. Both RMSNorm forwards run it, which
// keeps the fused residual variant bit-identical to Add then RMSNormForward.
func rmsNormRow(v fview, off int, tmp, x, w []float32, eps float32) float32 {
	s := rmsRstd(x, eps)
	o := v.out(off, len(x), tmp)
	scaleMul(o, x, w, s)
	v.vstore(off, o)
	return s
}

// rmsRstd is 1/√(mean(x²)+eps), the square root and division in float64.
func rmsRstd(x []float32, eps float32) float32 {
	return float32(1 / math.Sqrt(sumSquares(x)/float64(len(x))+float64(eps)))
}

// RMSNormBackward implements backend.DecoderOps. With n = inp·rstd and
// g = weight·dout: dinp = rstd·(g − n·mean(g·n)), dweight += Σ_rows dout·n.
// Each chunk of rows sums its own dweight partial; the partials are added
// in chunk order, so the result does not depend on scheduling.
func (be *Backend) RMSNormBackward(dinp, dweight, dout, inp, weight, rstd backend.Buffer, N, C int) {
	const op = "RMSNormBackward"
	checkLen(op, "dinp", dinp, N*C)
	checkLen(op, "dout", dout, N*C)
	checkLen(op, "inp", inp, N*C)
	checkLen(op, "weight", weight, C)
	checkLen(op, "rstd", rstd, N)
	rv := f32s(op, rstd)
	div := floatView(op, dinp)
	dov, iv, wv := floatView(op, dout), floatView(op, inp), floatView(op, weight)
	k := be.chunks(N, rowGrain(C))
	partial := make([]float32, k*C)
	be.parallel(N, rowGrain(C), func(wk, lo, hi int) {
		pw := partial[wk*C : (wk+1)*C]
		ditmp, dotmp, itmp := div.tmp(C), dov.tmp(C), iv.tmp(C)
		w := wv.vload(0, C, wv.tmp(C))
		for r := lo; r < hi; r++ {
			x := iv.vload(r*C, C, itmp)
			d := dov.vload(r*C, C, dotmp)
			o := div.out(r*C, C, ditmp)
			rmsNormBackwardRow(o, pw, x, d, w, rv[r])
			div.vstore(r*C, o)
		}
	})
	if !dweight.IsNil() { // zero for a frozen norm
		checkLen(op, "dweight", dweight, C)
		addChunkSums(floatView(op, dweight), partial, k, C)
	}
}

// addChunkSums adds the k per-chunk vectors of length C in partial to dst,
// in chunk order.
func addChunkSums(dst fview, partial []float32, k, C int) {
	acc := dst.vload(0, C, dst.tmp(C))
	for w := 0; w < k; w++ {
		p := partial[w*C : (w+1)*C]
		p = p[:len(acc)]
		for i := range acc {
			acc[i] += p[i]
		}
	}
	dst.vstore(0, acc)
}

// ResidualRMSNormForward implements backend.DecoderOps in one pass over
// memory: each row's sum is stored to residual, read back as stored (rounded
// to residual's dtype) and normalised by the row function RMSNormForward
// uses, so the results are bit-identical to Add then RMSNormForward.
// residual may alias a or b: a row is read before it is written.
func (be *Backend) ResidualRMSNormForward(residual, out, rstd, a, b, weight backend.Buffer, N, C int, eps float32) {
	const op = "ResidualRMSNormForward"
	checkLen(op, "residual", residual, N*C)
	checkLen(op, "out", out, N*C)
	checkLen(op, "rstd", rstd, N)
	checkLen(op, "a", a, N*C)
	checkLen(op, "b", b, N*C)
	checkLen(op, "weight", weight, C)
	rv := f32s(op, rstd)
	resv, ov, wv := floatView(op, residual), floatView(op, out), floatView(op, weight)
	av, bv := floatView(op, a), floatView(op, b)
	be.parallel(N, rowGrain(C), func(_, lo, hi int) {
		rtmp, otmp, atmp, btmp := resv.tmp(C), ov.tmp(C), av.tmp(C), bv.tmp(C)
		held := resv.tmp(C)
		w := wv.vload(0, C, wv.tmp(C))
		for r := lo; r < hi; r++ {
			x := av.vload(r*C, C, atmp)
			y := bv.vload(r*C, C, btmp)
			s := resv.out(r*C, C, rtmp)
			addRow(s, x, y)
			resv.vstore(r*C, s)
			rv[r] = rmsNormRow(ov, r*C, otmp, resv.vload(r*C, C, held), w, eps)
		}
	})
}

// The scalar row kernels. The vector builds (decmath_*.go) run the same
// arithmetic 16 lanes wide: elementwise results are bit-identical, float64
// sums differ only in their order (TestDecoderKernels).

// addRowScalar sets o = x + y, as Add does.
func addRowScalar(o, x, y []float32) {
	x, y = x[:len(o)], y[:len(o)]
	for i := range o {
		o[i] = x[i] + y[i]
	}
}

// sumSquaresScalar returns Σx² accumulated in float64.
func sumSquaresScalar(x []float32) float64 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	return ss
}

// scaleMulScalar sets o = x·s·w.
func scaleMulScalar(o, x, w []float32, s float32) {
	x, w = x[:len(o)], w[:len(o)]
	for i := range o {
		o[i] = x[i] * s * w[i]
	}
}

// rmsNormBackwardRowScalar sets o (the row's dinp) and adds the row's
// dweight share to pw, for the row x with gradient d, weight w and rstd s.
// mean(g·n) sums float32 products in float64.
func rmsNormBackwardRowScalar(o, pw, x, d, w []float32, s float32) {
	x, d, w, pw = x[:len(o)], d[:len(o)], w[:len(o)], pw[:len(o)]
	var dot float64
	for i := range o {
		dot += float64(w[i]*d[i]) * float64(x[i]*s)
	}
	m := float32(dot / float64(len(o)))
	for i := range o {
		n := x[i] * s
		pw[i] += d[i] * n
		o[i] = s * (w[i]*d[i] - n*m)
	}
}
