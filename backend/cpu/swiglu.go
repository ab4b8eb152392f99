package cpu

import "github.com/gotrain/gotrain/backend"

// SwiGLU's sigmoid is σ(g) = 1/(1+e) with e = e^−g from exp32, which clamps
// its argument, so e stays finite (≤ e^88.3) for very negative gates and
// σ's derivative σ·(1−σ) = σ·(e·σ) has no cancellation (as in GELU).

// SwiGLUForward implements backend.DecoderOps, in parallel over rows, a
// row's I columns in pieces of at most pieceLen.
func (be *Backend) SwiGLUForward(out, inp backend.Buffer, N, I int) {
	const op = "SwiGLUForward"
	checkLen(op, "out", out, N*I)
	checkLen(op, "inp", inp, N*2*I)
	ov, iv := floatView(op, out), floatView(op, inp)
	be.parallel(N, rowGrain(I), func(_, lo, hi int) {
		n0 := min(I, pieceLen)
		otmp, gtmp, utmp, etmp := ov.tmp(n0), iv.tmp(n0), iv.tmp(n0), make([]float32, n0)
		for r := lo; r < hi; r++ {
			for p := 0; p < I; p += pieceLen {
				n := min(pieceLen, I-p)
				g := iv.vload(r*2*I+p, n, gtmp)
				u := iv.vload(r*2*I+I+p, n, utmp)
				o := ov.out(r*I+p, n, otmp)
				siluMul(o, g, u, etmp)
				ov.vstore(r*I+p, o)
			}
		}
	})
}

// SwiGLUBackward implements backend.DecoderOps:
// dgate = dout·up·σ·(1 + g·(1−σ)), dup = dout·silu(g).
func (be *Backend) SwiGLUBackward(dinp, dout, inp backend.Buffer, N, I int) {
	const op = "SwiGLUBackward"
	checkLen(op, "dinp", dinp, N*2*I)
	checkLen(op, "dout", dout, N*I)
	checkLen(op, "inp", inp, N*2*I)
	dv, dov, iv := floatView(op, dinp), floatView(op, dout), floatView(op, inp)
	be.parallel(N, rowGrain(I), func(_, lo, hi int) {
		n0 := min(I, pieceLen)
		dgtmp, dutmp, dtmp := dv.tmp(n0), dv.tmp(n0), dov.tmp(n0)
		gtmp, utmp, etmp := iv.tmp(n0), iv.tmp(n0), make([]float32, n0)
		for r := lo; r < hi; r++ {
			for p := 0; p < I; p += pieceLen {
				n := min(pieceLen, I-p)
				g := iv.vload(r*2*I+p, n, gtmp)
				u := iv.vload(r*2*I+I+p, n, utmp)
				d := dov.vload(r*I+p, n, dtmp)
				dg := dv.out(r*2*I+p, n, dgtmp)
				du := dv.out(r*2*I+I+p, n, dutmp)
				siluMulBackward(dg, du, d, g, u, etmp)
				dv.vstore(r*2*I+p, dg)
				dv.vstore(r*2*I+I+p, du)
			}
		}
	})
}

// siluMulScalar sets o = silu(g)·u = g/(1+e^−g)·u, using e as scratch
// (len(e) ≥ len(o)).
func siluMulScalar(o, g, u, e []float32) {
	g, u, e = g[:len(o)], u[:len(o)], e[:len(o)]
	for i, gi := range g {
		e[i] = -gi
	}
	expInPlaceScalar(e)
	for i := range o {
		o[i] = g[i] / (1 + e[i]) * u[i]
	}
}

// siluMulBackwardScalar sets dg and du, the gradients of silu(g)·u for the
// output gradient d, using e as scratch.
func siluMulBackwardScalar(dg, du, d, g, u, e []float32) {
	du, d, g, u, e = du[:len(dg)], d[:len(dg)], g[:len(dg)], u[:len(dg)], e[:len(dg)]
	for i, gi := range g {
		e[i] = -gi
	}
	expInPlaceScalar(e)
	for i := range dg {
		gi := g[i]
		sg := 1 / (1 + e[i])
		es := e[i] * sg // 1−σ; e·σ ≤ 1 first: e alone may be ~1e38
		du[i] = d[i] * (gi * sg)
		dg[i] = d[i] * u[i] * (sg * (1 + gi*es))
	}
}
