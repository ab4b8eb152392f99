package backendtest

import (
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func nanFill(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

func testEncoder(t *testing.T, nb func(*testing.T) backend.Backend) {
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		B, T, C := s.B, s.T, s.C
		maxT := T + 3
		ids := h.ids(B*T, s.V)
		if s.odd {
			ids[0], ids[1] = 2, 2 // a repeated token must accumulate twice
		}
		inp := h.putInts(ids)
		wte, wteV := h.put(dc.param, h.normal(s.Vp*C, 1))
		wpe, wpeV := h.put(dc.param, h.normal(maxT*C, 1))
		out, _ := h.put(dc.act, nanFill(B*T*C))
		h.be.EncoderForward(out, inp, wte, wpe, B, T, C)
		want := make([]float64, B*T*C)
		RefEncoderForward(want, ids, wteV, wpeV, B, T, C)
		check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-6))

		dout, doutV := h.put(dc.act, h.normal(B*T*C, 1))
		dwte, dwteV := h.put(dc.param, h.normal(s.Vp*C, 1)) // += must keep these
		dwpe, dwpeV := h.put(dc.param, h.normal(maxT*C, 1))
		h.be.EncoderBackward(dwte, dwpe, dout, inp, B, T, C)
		gte, gpe := make([]float64, s.Vp*C), make([]float64, maxT*C)
		RefEncoderBackward(gte, gpe, doutV, ids, B, T, C)
		gotTE, gotPE := h.get(dwte), h.get(dwpe)
		check(h.t, "dwte", gotTE, add(dwteV, gte), tolFor(dc.param, add(dwteV, gte), 1e-6))
		check(h.t, "dwpe", gotPE, add(dwpeV, gpe), tolFor(dc.param, add(dwpeV, gpe), 1e-6))

		// Without learned positions (the zero Buffer for wpe and dwpe): a
		// lookup, and its gradient into dwte only.
		h.be.EncoderForward(out, inp, wte, backend.Buffer{}, B, T, C)
		lookup := make([]float64, B*T*C)
		RefEncoderForward(lookup, ids, wteV, make([]float64, maxT*C), B, T, C)
		check(h.t, "out without wpe", h.get(out), lookup, tolFor(dc.act, lookup, 1e-6))
		before := h.get(dwte)
		h.be.EncoderBackward(dwte, backend.Buffer{}, dout, inp, B, T, C)
		check(h.t, "dwte without dwpe", h.get(dwte), add(before, gte), tolFor(dc.param, add(before, gte), 1e-6))
		check(h.t, "dwpe untouched", h.get(dwpe), gotPE, tol{})

		if s.finiteDiffOK && dc.param == backend.F32 && dc.act == backend.F32 {
			fwd := make([]float64, B*T*C)
			L := func() float64 { RefEncoderForward(fwd, ids, wteV, wpeV, B, T, C); return project(fwd, doutV) }
			fdTE, fdPE := finiteDiff(wteV, L), finiteDiff(wpeV, L)
			check(h.t, "ref dwte vs finite differences", gte, fdTE, fdTol(fdTE))
			check(h.t, "ref dwpe vs finite differences", gpe, fdPE, fdTol(fdPE))
			check(h.t, "dwte vs finite differences", sub(gotTE, dwteV), fdTE, tolFor(backend.F32, fdTE, 1e-5))
			check(h.t, "dwpe vs finite differences", sub(gotPE, dwpeV), fdPE, tolFor(backend.F32, fdPE, 1e-5))
		}
	})
}

// sub returns a−b elementwise as a new slice.
func sub(a, b []float64) []float64 {
	s := make([]float64, len(a))
	for i := range a {
		s[i] = a[i] - b[i]
	}
	return s
}
