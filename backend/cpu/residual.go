package cpu

import "github.com/gotrain/gotrain/backend"

// Add implements backend.Backend. out may alias a or b: each piece is read
// before it is written.
func (be *Backend) Add(out, a, b backend.Buffer, N int) {
	const op = "Add"
	checkLen(op, "out", out, N)
	checkLen(op, "a", a, N)
	checkLen(op, "b", b, N)
	ov, av, bv := floatView(op, out), floatView(op, a), floatView(op, b)
	be.parallel(N, elemGrain, func(_, lo, hi int) {
		otmp, atmp, btmp := ov.tmp(pieceLen), av.tmp(pieceLen), bv.tmp(pieceLen)
		for s := lo; s < hi; s += pieceLen {
			n := min(pieceLen, hi-s)
			x := av.vload(s, n, atmp)
			y := bv.vload(s, n, btmp)
			o := ov.out(s, n, otmp)
			x, y = x[:len(o)], y[:len(o)]
			for i := range o {
				o[i] = x[i] + y[i]
			}
			ov.vstore(s, o)
		}
	})
}

// Scale implements backend.Backend.
func (be *Backend) Scale(x backend.Buffer, s float32) {
	xv := floatView("Scale", x)
	be.parallel(x.Len(), elemGrain, func(_, lo, hi int) {
		tmp := xv.tmp(pieceLen)
		for p := lo; p < hi; p += pieceLen {
			v := xv.vload(p, min(pieceLen, hi-p), tmp)
			for i := range v {
				v[i] *= s
			}
			xv.vstore(p, v)
		}
	})
}
