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
			g := gv.vload(s, k, gtmp)
			var w []float32
			if ms != nil {
				w = ms[s : s+k]
			} else {
				w = pv.vload(s, k, ptmp)
			}
			adamwRow(w, g, mv[s:s+k], vv[s:s+k], adamwConsts{b1: b1, b2: b2, bc1: bc1, bc2: bc2, lr: lr, eps: eps, wd: wd, gs: gs})
			if ms != nil {
				o := pv.out(s, k, ptmp)
				copy(o, w)
				pv.vstore(s, o)
			} else {
				pv.vstore(s, w)
			}
		}
	})
}

// adamwConsts are one AdamW call's scalars.
type adamwConsts struct {
	b1, b2, bc1, bc2, lr, eps, wd, gs float32
}

// adamwRowScalar updates weights w and moments mm, vm from gradients g.
// float32(√float64(v)) is the correctly rounded float32 square root, what
// VSQRTPS gives, so the vector loop matches it bit for bit.
func adamwRowScalar(w, g, mm, vm []float32, c adamwConsts) {
	g, mm, vm = g[:len(w)], mm[:len(w)], vm[:len(w)]
	for i := range w {
		gi := g[i] * c.gs
		mi := c.b1*mm[i] + (1-c.b1)*gi
		vi := c.b2*vm[i] + (1-c.b2)*gi*gi
		mm[i], vm[i] = mi, vi
		mh := mi / c.bc1
		vh := vi / c.bc2
		w[i] -= c.lr * (mh/(float32(math.Sqrt(float64(vh)))+c.eps) + c.wd*w[i])
	}
}
