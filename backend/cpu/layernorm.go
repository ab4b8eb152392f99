package cpu

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// lnEps is GPT-2's LayerNorm epsilon.
const lnEps = 1e-5

// LayerNormForward implements backend.Backend, in parallel over rows. The
// variance is the biased one (divide by C), computed from centred values in a
// second pass rather than E[x²]−E[x]² to avoid cancellation. Both sums run in
// float64: a row whose mean is large next to its spread (0.5 ± 0.01) loses
// 1e-5 relative accuracy to a float32 mean, and the widening is free next to
// the memory traffic.
func (be *Backend) LayerNormForward(out, mean, rstd, inp, weight, bias backend.Buffer, N, C int) {
	const op = "LayerNormForward"
	checkLen(op, "out", out, N*C)
	checkLen(op, "inp", inp, N*C)
	checkLen(op, "mean", mean, N)
	checkLen(op, "rstd", rstd, N)
	checkLen(op, "weight", weight, C)
	checkLen(op, "bias", bias, C)
	mv, rv := f32s(op, mean), f32s(op, rstd)
	ov, iv, wv, bv := floatView(op, out), floatView(op, inp), floatView(op, weight), floatView(op, bias)
	be.parallel(N, rowGrain(C), func(_, lo, hi int) {
		otmp, itmp := ov.tmp(C), iv.tmp(C)
		w := wv.vload(0, C, wv.tmp(C))
		b := bv.vload(0, C, bv.tmp(C))
		for r := lo; r < hi; r++ {
			x := iv.vload(r*C, C, itmp)
			var sum float64
			for _, xi := range x {
				sum += float64(xi)
			}
			m64 := sum / float64(C)
			var ss float64
			for _, xi := range x {
				d := float64(xi) - m64
				ss += d * d
			}
			m := float32(m64)
			s := float32(1 / math.Sqrt(ss/float64(C)+lnEps))
			o := ov.out(r*C, C, otmp)
			w, b := w[:len(o)], b[:len(o)]
			x = x[:len(o)]
			for i := range o {
				o[i] = (x[i]-m)*s*w[i] + b[i]
			}
			ov.vstore(r*C, o)
			mv[r] = m
			rv[r] = s
		}
	})
}

// LayerNormBackward implements backend.Backend. With n = (x−mean)·rstd and
// g = weight·dout: dinp = rstd·(g − mean(g) − n·mean(g·n)), dweight += Σ n·dout,
// dbias += Σ dout. Rows are split across goroutines; each sums its own
// dweight/dbias partials, which are then added in chunk order. Zero dweight
// and dbias (a frozen norm) leave the partials unused.
func (be *Backend) LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd backend.Buffer, N, C int) {
	const op = "LayerNormBackward"
	checkLen(op, "dinp", dinp, N*C)
	checkLen(op, "dout", dout, N*C)
	checkLen(op, "inp", inp, N*C)
	frozen := dweight.IsNil() && dbias.IsNil()
	if !frozen {
		checkLen(op, "dweight", dweight, C)
		checkLen(op, "dbias", dbias, C)
	}
	checkLen(op, "weight", weight, C)
	checkLen(op, "mean", mean, N)
	checkLen(op, "rstd", rstd, N)
	mv, rv := f32s(op, mean), f32s(op, rstd)
	div := floatView(op, dinp)
	dov, iv, wv := floatView(op, dout), floatView(op, inp), floatView(op, weight)

	k := be.chunks(N, rowGrain(C))
	partial := make([]float32, 2*k*C) // chunk w: dweight at [2wC, 2wC+C), dbias after
	be.parallel(N, rowGrain(C), func(wk, lo, hi int) {
		pw := partial[2*wk*C : 2*wk*C+C]
		pb := partial[2*wk*C+C : 2*wk*C+2*C]
		ditmp, dotmp, itmp := div.tmp(C), dov.tmp(C), iv.tmp(C)
		w := wv.vload(0, C, wv.tmp(C))
		for r := lo; r < hi; r++ {
			x := iv.vload(r*C, C, itmp)
			d := dov.vload(r*C, C, dotmp)
			m, s := mv[r], rv[r]
			x, w := x[:len(d)], w[:len(d)]
			var gMean, gnMean float32
			for i := range d {
				n := (x[i] - m) * s
				g := w[i] * d[i]
				gMean += g
				gnMean += g * n
			}
			gMean /= float32(C)
			gnMean /= float32(C)
			o := div.out(r*C, C, ditmp)
			o, pw, pb := o[:len(d)], pw[:len(d)], pb[:len(d)]
			for i := range d {
				n := (x[i] - m) * s
				pw[i] += n * d[i]
				pb[i] += d[i]
				o[i] = s * (w[i]*d[i] - gMean - n*gnMean)
			}
			div.vstore(r*C, o)
		}
	})
	if !frozen {
		addPartials(floatView(op, dweight), partial, k, C, 0)
		addPartials(floatView(op, dbias), partial, k, C, C)
	}
}

// addPartials adds, in chunk order, the k per-chunk vectors of length C found
// at partial[2wC+at:] into dst (dst += Σ_w partial_w).
func addPartials(dst fview, partial []float32, k, C, at int) {
	acc := dst.vload(0, C, dst.tmp(C))
	for w := 0; w < k; w++ {
		p := partial[2*w*C+at : 2*w*C+at+C]
		p = p[:len(acc)]
		for i := range acc {
			acc[i] += p[i]
		}
	}
	dst.vstore(0, acc)
}
