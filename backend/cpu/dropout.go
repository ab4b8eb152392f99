package cpu

import "github.com/gotrain/gotrain/backend"

var _ backend.Dropouter = (*Backend)(nil)

// Dropout implements backend.Dropouter, in parallel over pieces; the mask
// is backend.DropoutKeep's, so it equals every other backend's.
func (be *Backend) Dropout(out, inp backend.Buffer, p float32, seed uint64, N int) {
	const op = "Dropout"
	checkLen(op, "out", out, N)
	checkLen(op, "inp", inp, N)
	if !(p >= 0 && p < 1) {
		panic("cpu: Dropout: p outside [0, 1)")
	}
	ov, iv := floatView(op, out), floatView(op, inp)
	t, s := backend.DropoutThreshold(p), backend.DropoutScale(p)
	be.parallel(N, elemGrain, func(_, lo, hi int) {
		otmp, itmp := ov.tmp(pieceLen), iv.tmp(pieceLen)
		for at := lo; at < hi; at += pieceLen {
			n := min(pieceLen, hi-at)
			x := iv.vload(at, n, itmp)
			o := ov.out(at, n, otmp)
			x = x[:len(o)]
			for i := range o {
				if backend.DropoutKeep(seed, int64(at+i), t) {
					o[i] = x[i] * s
				} else {
					o[i] = 0
				}
			}
			ov.vstore(at, o)
		}
	})
}
