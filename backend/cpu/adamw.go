package cpu

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// AdamW implements backend.Backend as PyTorch's torch.optim.AdamW: bias
// corrections 1−β^step, eps added outside the square root, decay decoupled
// from the moments. The bias corrections are computed once in float64.
func (be *Backend) AdamW(param, master, grad, m, v backend.Buffer, p backend.AdamWParams) {
	const op = "AdamW"
	n := param.Len()
	checkLen(op, "grad", grad, n)
	checkLen(op, "m", m, n)
	checkLen(op, "v", v, n)
	if p.Step < 1 {
		panic("cpu: AdamW: Step must be ≥ 1")
	}
	mv, vv := f32s(op, m), f32s(op, v)
	pv, gv := floatView(op, param), floatView(op, grad)
	var ms []float32
	if !master.IsNil() {
		checkLen(op, "master", master, n)
		ms = f32s(op, master)
	}
	b1, b2 := p.Beta1, p.Beta2
	bc1 := float32(1 - math.Pow(float64(b1), float64(p.Step)))
	bc2 := float32(1 - math.Pow(float64(b2), float64(p.Step)))
	lr, eps, wd, gs := p.LR, p.Eps, p.WeightDecay, p.GradScale
	be.parallel(n, elemGrain, func(_, lo, hi int) {
		ptmp, gtmp := pv.tmp(pieceLen), gv.tmp(pieceLen)
		for s := lo; s < hi; s += pieceLen {
			k := min(pieceLen, hi-s)
			g := gv.load(s, k, gtmp)
			var w []float32
			if ms != nil {
				w = ms[s : s+k]
			} else {
				w = pv.load(s, k, ptmp)
			}
			mm, vm := mv[s:s+k], vv[s:s+k]
			g, mm, vm = g[:len(w)], mm[:len(w)], vm[:len(w)]
			for i := range w {
				gi := g[i] * gs
				mi := b1*mm[i] + (1-b1)*gi
				vi := b2*vm[i] + (1-b2)*gi*gi
				mm[i], vm[i] = mi, vi
				mh := mi / bc1
				vh := vi / bc2
				w[i] -= lr * (mh/(float32(math.Sqrt(float64(vh)))+eps) + wd*w[i])
			}
			if ms != nil {
				o := pv.out(s, k, ptmp)
				copy(o, w)
				pv.store(s, o)
			} else {
				pv.store(s, w)
			}
		}
	})
}
