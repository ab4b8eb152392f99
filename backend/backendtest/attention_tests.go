package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testAttention(t *testing.T, nb func(*testing.T) backend.Backend) {
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		B, T, C, NH := s.B, s.T, s.C, s.NH
		qkv, qkvV := h.put(dc.act, h.normal(B*T*3*C, 1))
		out, _ := h.put(dc.act, nanFill(B*T*C))
		att, _ := h.put(backend.F32, nanFill(B*NH*T*T))
		h.be.AttentionForward(out, att, qkv, B, T, C, NH)
		want, wantAtt := make([]float64, B*T*C), make([]float64, B*NH*T*T)
		RefAttentionForward(want, wantAtt, qkvV, B, T, C, NH)
		check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-5))
		// Masked entries must be exactly zero: the reference's are, and the
		// tolerance there is only 1e-5·rms.
		check(h.t, "att", h.get(att), wantAtt, tolFor(backend.F32, wantAtt, 1e-5))

		dout, doutV := h.put(dc.act, h.normal(B*T*C, 1))
		dqkv, _ := h.put(dc.act, nanFill(B*T*3*C))
		datt, _ := h.put(backend.F32, nanFill(B*NH*T*T))
		h.be.AttentionBackward(dqkv, datt, dout, qkv, att, B, T, C, NH)
		g := make([]float64, B*T*3*C)
		RefAttentionBackward(g, doutV, qkvV, wantAtt, B, T, C, NH)
		got := h.get(dqkv)
		check(h.t, "dqkv", got, g, tolFor(dc.act, g, 1e-5))

		if s.finiteDiffOK && dc.act == backend.F32 {
			o, a := make([]float64, B*T*C), make([]float64, B*NH*T*T)
			L := func() float64 { RefAttentionForward(o, a, qkvV, B, T, C, NH); return project(o, doutV) }
			fd := finiteDiff(qkvV, L)
			check(h.t, "ref dqkv vs finite differences", g, fd, fdTol(fd))
			check(h.t, "dqkv vs finite differences", got, fd, tolFor(backend.F32, fd, 1e-5))
		}
	})
}
