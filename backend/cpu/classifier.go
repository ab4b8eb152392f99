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
			x := xv.load(r*Vp, V, xtmp)
			m, sum := softmaxRow(p, x)
			lv[r] = float32(math.Log(sum) + float64(m) - float64(x[tg[r]]))
			if dloss == 0 {
				continue
			}
			d := xv.out(r*Vp, Vp, xtmp) // x is read no more: its memory takes dlogits
			for j, pj := range p {
				d[j] = pj * dloss
			}
			d[tg[r]] -= dloss
			clear(d[V:])
			xv.store(r*Vp, d)
		}
	})
}
