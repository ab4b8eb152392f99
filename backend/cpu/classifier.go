package cpu

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// FusedClassifier implements backend.Backend, in parallel over rows. Each
// row's probabilities live in fp32 row scratch only, and are computed by
// the exp pass of CrossEntropyForward's softmaxRow, then scaled by its
// 1/Σ and by dloss as each dlogit is written, each product rounded, so
// losses and fp32 dlogits are bit-identical to CrossEntropyForward then
// CrossEntropyBackward. bf16 logits are read as they are (widened in
// registers) and dlogits rounded as they are written: two passes over a
// row's memory, none over an fp32 copy.
func (be *Backend) FusedClassifier(losses, logits, targets backend.Buffer, dloss float32, N, V, Vp int) {
	const op = "FusedClassifier"
	checkCE(op, N, V, Vp)
	checkLen(op, "losses", losses, N)
	checkLen(op, "logits", logits, N*Vp)
	checkLen(op, "targets", targets, N)
	tg := checkTargets(op, targets, V)
	lv := f32s(op, losses)
	xv := floatView(op, logits)
	be.parallel(N, rowGrain(V), func(_, lo, hi int) {
		var xtmp []float32
		if xv.dt == backend.F16 {
			xtmp = xv.tmp(Vp)
		}
		p := make([]float32, V)
		for r := lo; r < hi; r++ {
			t := int(tg[r])
			var m, xt float32
			var sum float64
			if xv.dt == backend.BF16 {
				m, sum = expRowBF16(p, xv.u16[r*Vp:r*Vp+V])
				xt = backend.F32FromBF16(xv.u16[r*Vp+t])
			} else {
				x := xv.vload(r*Vp, V, xtmp)
				m, sum = expRow(p, x)
				xt = x[t]
			}
			lv[r] = float32(math.Log(sum) + float64(m) - float64(xt))
			if dloss == 0 {
				continue
			}
			// dlogits = softmax·dloss, less dloss at the target, each
			// product rounded to fp32 as softmaxRow then
			// CrossEntropyBackward round them.
			inv := float32(1 / sum)
			dt := float32(float32(p[t]*inv) * dloss)
			dt -= dloss
			if xv.isF32() {
				d := xv.f32[r*Vp : (r+1)*Vp]
				scaleRow(d[:V], p, inv, dloss)
				d[t] = dt
				clear(d[V:])
				continue
			}
			xv.vstoreScaled(r*Vp, p, inv, dloss)
			xv.store(r*Vp+t, []float32{dt})
			clear(xv.u16[r*Vp+V : (r+1)*Vp])
		}
	})
}

// scaleRowScalar sets o = x·a·b, each product rounded.
func scaleRowScalar(o, x []float32, a, b float32) {
	x = x[:len(o)]
	for j, v := range x {
		o[j] = float32(v*a) * b
	}
}

// storeScaled is store(off, x·a·b) without the scaled copy.
func (v fview) storeScaled(off int, x []float32, a, b float32) {
	if v.isF32() {
		scaleRowScalar(v.f32[off:off+len(x)], x, a, b)
		return
	}
	dst := v.u16[off : off+len(x)]
	if v.dt == backend.BF16 {
		for i, e := range x {
			dst[i] = backend.BF16FromF32(float32(e*a) * b)
		}
		return
	}
	for i, e := range x {
		dst[i] = backend.F16FromF32(float32(e*a) * b)
	}
}
