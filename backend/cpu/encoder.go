package cpu

import (
	"cmp"
	"slices"

	"github.com/gotrain/gotrain/backend"
)

// EncoderForward implements backend.Backend, in parallel over the B·T rows.
// Without wpe each row is a copy of its wte row.
func (be *Backend) EncoderForward(out, inp, wte, wpe backend.Buffer, B, T, C int) {
	const op = "EncoderForward"
	checkLen(op, "out", out, B*T*C)
	checkLen(op, "inp", inp, B*T)
	ids := i32s(op, inp)
	checkIDs(op, ids, wte, wpe, T, C)
	pos := !wpe.IsNil()
	ov, ev := floatView(op, out), floatView(op, wte)
	var pv fview
	if pos {
		pv = floatView(op, wpe)
	}
	be.parallel(B*T, rowGrain(C), func(_, lo, hi int) {
		otmp, etmp := ov.tmp(C), ev.tmp(C)
		var ptmp []float32
		if pos {
			ptmp = pv.tmp(C)
		}
		for bt := lo; bt < hi; bt++ {
			o := ov.out(bt*C, C, otmp)
			e := ev.vload(int(ids[bt])*C, C, etmp)
			e = e[:len(o)]
			if !pos {
				copy(o, e)
				ov.vstore(bt*C, o)
				continue
			}
			p := pv.vload((bt%T)*C, C, ptmp)
			p = p[:len(o)]
			for i := range o {
				o[i] = e[i] + p[i]
			}
			ov.vstore(bt*C, o)
		}
	})
}

// EncoderBackward implements backend.Backend. Rows of dwte may repeat (the
// same token twice), so instead of splitting rows the work is split by
// channel range: each goroutine owns columns [c0, c1) of dwte and dwpe,
// which is race-free and sums in a fixed order. Positions holding the same
// token are visited together so each dwte row is loaded and stored once (one
// rounding per row for 16-bit gradients). Without dwpe only dwte is
// accumulated; without either (frozen embeddings) nothing is done.
func (be *Backend) EncoderBackward(dwte, dwpe, dout, inp backend.Buffer, B, T, C int) {
	const op = "EncoderBackward"
	if dwte.IsNil() {
		if !dwpe.IsNil() {
			panic("cpu: " + op + ": dwpe without dwte")
		}
		return // frozen embeddings
	}
	checkLen(op, "dout", dout, B*T*C)
	checkLen(op, "inp", inp, B*T)
	ids := i32s(op, inp)
	checkIDs(op, ids, dwte, dwpe, T, C)
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ids[a], ids[b]) })

	pos := !dwpe.IsNil()
	ev, dv := floatView(op, dwte), floatView(op, dout)
	var pv fview
	if pos {
		pv = floatView(op, dwpe)
	}
	be.parallel(C, max(1, (1<<14)/max(1, B*T)), func(_, c0, c1 int) {
		w := c1 - c0
		etmp, dtmp := ev.tmp(w), dv.tmp(w)
		var ptmp []float32
		if pos {
			ptmp = pv.tmp(w)
		}
		for t := 0; pos && t < T; t++ {
			p := pv.vload(t*C+c0, w, ptmp)
			for b := 0; b < B; b++ {
				d := dv.vload((b*T+t)*C+c0, w, dtmp)
				d = d[:len(p)]
				for i := range p {
					p[i] += d[i]
				}
			}
			pv.vstore(t*C+c0, p)
		}
		for g := 0; g < len(order); {
			id := int(ids[order[g]])
			e := ev.vload(id*C+c0, w, etmp)
			for ; g < len(order) && int(ids[order[g]]) == id; g++ {
				d := dv.vload(order[g]*C+c0, w, dtmp)
				d = d[:len(e)]
				for i := range e {
					e[i] += d[i]
				}
			}
			ev.vstore(id*C+c0, e)
		}
	})
}

// checkIDs panics unless wte and wpe are whole rows of C, wpe (when given)
// covers T positions and every id names a row of wte.
func checkIDs(op string, ids []int32, wte, wpe backend.Buffer, T, C int) {
	if C <= 0 || wte.Len()%C != 0 || (!wpe.IsNil() && (wpe.Len()%C != 0 || wpe.Len() < T*C)) {
		panic("cpu: " + op + ": wte/wpe shape does not match C and T")
	}
	rows := int32(wte.Len() / C)
	for _, id := range ids {
		if id < 0 || id >= rows {
			panic("cpu: " + op + ": token id out of range of wte")
		}
	}
}

// rowGrain is how many rows of C elements make a chunk worth a goroutine.
func rowGrain(C int) int { return max(1, (1<<13)/max(1, C)) }
