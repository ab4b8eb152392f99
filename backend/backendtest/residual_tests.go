package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testResidual(t *testing.T, nb func(*testing.T) backend.Backend) {
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		N := s.B*s.T*s.C + 3
		a, aV := h.put(dc.act, h.normal(N, 1))
		b, bV := h.put(dc.param, h.normal(N, 1))
		out, _ := h.put(dc.act, nanFill(N))
		h.be.Add(out, a, b, N)
		want := add(aV, bV)
		check(h.t, "Add", h.get(out), want, tolFor(dc.act, want, 1e-6))

		// In place: out aliases a, as the residual stream does.
		h.be.Add(a, a, b, N)
		check(h.t, "Add in place", h.get(a), want, tolFor(dc.act, want, 1e-6))

		x, xV := h.put(dc.act, h.normal(N, 1))
		h.be.Scale(x.Slice(1, N-2), -0.375)
		for i := 1; i < N-1; i++ {
			xV[i] *= -0.375
		}
		check(h.t, "Scale of a slice", h.get(x), xV, tolFor(dc.act, xV, 1e-6))
	})
}
