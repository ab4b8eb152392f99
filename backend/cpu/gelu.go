package cpu

import "github.com/gotrain/gotrain/backend"

// GELU's tanh form uses the identity 0.5·(1+tanh(u)) = σ(2u) = 1/(1+e^(−2u)),
// which needs one exp32 and no tanh, and whose derivative
// σ(2u)·(1−σ(2u)) = e·σ² (e = e^(−2u)) has no cancellation.
const (
	geluK = 0.7978845608028654 // √(2/π)
	geluA = 0.044715
)

// elemGrain is how many elements of an elementwise op make a chunk worth a
// goroutine.
const elemGrain = 1 << 14

// GeluForward implements backend.Backend. out may alias inp.
func (be *Backend) GeluForward(out, inp backend.Buffer, N int) {
	const op = "GeluForward"
	checkLen(op, "out", out, N)
	checkLen(op, "inp", inp, N)
	ov, iv := floatView(op, out), floatView(op, inp)
	be.parallel(N, elemGrain, func(_, lo, hi int) {
		otmp, itmp, etmp := ov.tmp(pieceLen), iv.tmp(pieceLen), make([]float32, pieceLen)
		for s := lo; s < hi; s += pieceLen {
			n := min(pieceLen, hi-s)
			x := iv.vload(s, n, itmp)
			o := ov.out(s, n, otmp)
			geluRow(o, x, etmp)
			ov.vstore(s, o)
		}
	})
}

// geluRowScalar sets o = gelu(x); e is scratch of len(x).
func geluRowScalar(o, x, e []float32) {
	e = e[:len(x)]
	for i, xi := range x {
		e[i] = -2 * geluK * (xi + geluA*xi*xi*xi)
	}
	expInPlaceScalar(e)
	o, e = o[:len(x)], e[:len(x)]
	for i := range o {
		o[i] = x[i] / (1 + e[i])
	}
}

// geluBackwardRowScalar sets o = gelu'(x)·g; e is scratch of len(x).
func geluBackwardRowScalar(o, x, g, e []float32) {
	e = e[:len(x)]
	for i, xi := range x {
		e[i] = -2 * geluK * (xi + geluA*xi*xi*xi)
	}
	expInPlaceScalar(e)
	o, g = o[:len(x)], g[:len(x)]
	for i := range o {
		xi, ei := x[i], e[i]
		du := geluK * (1 + 3*geluA*xi*xi)
		sg := 1 / (1 + ei)
		o[i] = (sg + 2*xi*du*(ei*sg)*sg) * g[i] // e·σ ≤ 1 first: e alone may be ~1e38
	}
}

// GeluBackward implements backend.Backend. dinp may alias dout.
// gelu'(x) = σ + 2x·σ(1−σ)·u'(x) with σ = σ(2u), u' = √(2/π)(1+3·0.044715x²).
func (be *Backend) GeluBackward(dinp, inp, dout backend.Buffer, N int) {
	const op = "GeluBackward"
	checkLen(op, "dinp", dinp, N)
	checkLen(op, "inp", inp, N)
	checkLen(op, "dout", dout, N)
	dv, iv, gv := floatView(op, dinp), floatView(op, inp), floatView(op, dout)
	be.parallel(N, elemGrain, func(_, lo, hi int) {
		dtmp, itmp, gtmp, etmp := dv.tmp(pieceLen), iv.tmp(pieceLen), gv.tmp(pieceLen), make([]float32, pieceLen)
		for s := lo; s < hi; s += pieceLen {
			n := min(pieceLen, hi-s)
			x := iv.vload(s, n, itmp)
			g := gv.vload(s, n, gtmp)
			o := dv.out(s, n, dtmp)
			geluBackwardRow(o, x, g, etmp)
			dv.vstore(s, o)
		}
	})
}
