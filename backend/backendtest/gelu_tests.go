package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testGelu(t *testing.T, nb func(*testing.T) backend.Backend) {
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		N := s.B * s.T * 4 * s.C
		xs := h.normal(N, 2)
		// The tails, where tanh saturates and exp-based forms overflow.
		tails := []float64{-30, -12, -9.5, -6, 0, 1e-4, -1e-4, 6, 9.5, 12, 30}
		copy(xs, tails)
		inp, inpV := h.put(dc.act, xs)
		out, _ := h.put(dc.act, nanFill(N))
		h.be.GeluForward(out, inp, N)
		want := make([]float64, N)
		RefGeluForward(want, inpV)
		check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-5))

		dout, doutV := h.put(dc.act, h.normal(N, 1))
		dinp, _ := h.put(dc.act, nanFill(N))
		h.be.GeluBackward(dinp, inp, dout, N)
		g := make([]float64, N)
		RefGeluBackward(g, inpV, doutV)
		got := h.get(dinp)
		check(h.t, "dinp", got, g, tolFor(dc.act, g, 1e-5))

		if s.finiteDiffOK && dc.act == backend.F32 {
			o := make([]float64, N)
			L := func() float64 { RefGeluForward(o, inpV); return project(o, doutV) }
			fd := finiteDiff(inpV, L)
			check(h.t, "ref dinp vs finite differences", g, fd, fdTol(fd))
			check(h.t, "dinp vs finite differences", got, fd, tolFor(backend.F32, fd, 1e-5))
		}
	})
}
