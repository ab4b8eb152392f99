package cpu

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// FusedClassifier implements backend.Backend, in parallel over rows. Each
// row's probabilities live in fp32 row scratch only, and are computed by
// the same softmaxRow as CrossEntropyForward, so losses and fp32 dlogits
// are bit-identical to CrossEntropyForward then CrossEntropyBackward.
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
		xtmp, p := xv.tmp(Vp), make([]float32, V)
		for r := lo; r < hi; r++ {
			x := xv.vload(r*Vp, V, xtmp)
			t := int(tg[r])
			m, sum := softmaxRow(p, x)
			lv[r] = float32(math.Log(sum) + float64(m) - float64(x[t]))
			if dloss == 0 {
				continue
			}
			// dlogits = p·dloss, less dloss at the target, each rounded
			// to fp32 as CrossEntropyBackward rounds them; a 16-bit row
			// is scaled and rounded in one pass, with no fp32 copy.
			dt := float32(p[t] * dloss)
			dt -= dloss
			if xv.isF32() {
				d := xv.f32[r*Vp : (r+1)*Vp]
				scaleRow(d[:V], p, dloss)
				d[t] = dt
				clear(d[V:])
				continue
			}
			xv.vstoreScaled(r*Vp, p, dloss)
			xv.store(r*Vp+t, []float32{dt})
			clear(xv.u16[r*Vp+V : (r+1)*Vp])
		}
	})
}

// scaleRowScalar sets o = x·s.
func scaleRowScalar(o, x []float32, s float32) {
	x = x[:len(o)]
	for j, v := range x {
		o[j] = v * s
	}
}

// storeScaled is store(off, x·s) without the scaled copy.
func (v fview) storeScaled(off int, x []float32, s float32) {
	if v.isF32() {
		scaleRowScalar(v.f32[off:off+len(x)], x, s)
		return
	}
	dst := v.u16[off : off+len(x)]
	if v.dt == backend.BF16 {
		for i, e := range x {
			dst[i] = backend.BF16FromF32(e * s)
		}
		return
	}
	for i, e := range x {
		dst[i] = backend.F16FromF32(e * s)
	}
}
