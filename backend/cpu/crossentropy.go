package cpu

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// CrossEntropyForward implements backend.Backend, in parallel over rows.
// The loss is computed as log Σe^(x−max) + max − x[target] rather than
// −log p[target], which keeps full precision when p[target] is tiny.
func (be *Backend) CrossEntropyForward(losses, probs, logits, targets backend.Buffer, N, V, Vp int) {
	const op = "CrossEntropyForward"
	checkCE(op, N, V, Vp)
	checkLen(op, "losses", losses, N)
	checkLen(op, "probs", probs, N*Vp)
	checkLen(op, "logits", logits, N*Vp)
	checkLen(op, "targets", targets, N)
	tg := checkTargets(op, targets, V)
	lv, pv := f32s(op, losses), f32s(op, probs)
	xv := floatView(op, logits)
	be.parallel(N, rowGrain(V), func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			// A 16-bit row is widened into its probabilities' memory and
			// softmaxed in place (same-index reads and writes): no scratch.
			p := pv[r*Vp : (r+1)*Vp]
			x := xv.vload(r*Vp, V, p)
			xt := x[tg[r]]
			m, sum := softmaxRow(p[:len(x)], x)
			clear(p[V:])
			lv[r] = float32(math.Log(sum) + float64(m) - float64(xt))
		}
	})
}

// CrossEntropyBackward implements backend.Backend. dlogits may alias probs
// (then both are F32 and each element is read before it is written).
func (be *Backend) CrossEntropyBackward(dlogits, probs, targets backend.Buffer, dloss float32, N, V, Vp int) {
	const op = "CrossEntropyBackward"
	checkCE(op, N, V, Vp)
	checkLen(op, "dlogits", dlogits, N*Vp)
	checkLen(op, "probs", probs, N*Vp)
	checkLen(op, "targets", targets, N)
	tg := checkTargets(op, targets, V)
	pv := f32s(op, probs)
	dv := floatView(op, dlogits)
	be.parallel(N, rowGrain(V), func(_, lo, hi int) {
		dtmp := dv.tmp(Vp)
		for r := lo; r < hi; r++ {
			p := pv[r*Vp : (r+1)*Vp]
			d := dv.out(r*Vp, Vp, dtmp)
			live := d[:V]
			pl := p[:len(live)]
			for j := range live {
				live[j] = pl[j] * dloss
			}
			d[tg[r]] -= dloss
			clear(d[V:])
			dv.vstore(r*Vp, d)
		}
	})
}

func checkCE(op string, N, V, Vp int) {
	if N < 0 || V <= 0 || Vp < V {
		panic("cpu: " + op + ": want N ≥ 0 and 0 < V ≤ Vp")
	}
}

// checkTargets panics unless every target is a real (unpadded) class.
func checkTargets(op string, targets backend.Buffer, V int) []int32 {
	tg := i32s(op, targets)
	for _, t := range tg {
		if t < 0 || int(t) >= V {
			panic("cpu: " + op + ": target out of range of V")
		}
	}
	return tg
}
