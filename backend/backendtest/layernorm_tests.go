package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testLayerNorm(t *testing.T, nb func(*testing.T) backend.Backend) {
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		N, C := s.B*s.T, s.C
		xs := h.normal(N*C, 1)
		for i := range xs {
			// A nonzero mean, so centring matters, and every third row with
			// variance 1e-4, where eps = 1e-5 changes rstd by 5%.
			if (i/C)%3 == 1 {
				xs[i] *= 0.01
			}
			xs[i] += 0.5
		}
		inp, inpV := h.put(dc.act, xs)
		ws := h.normal(C, 0.1)
		for i := range ws {
			ws[i] += 1
		}
		weight, weightV := h.put(dc.param, ws)
		bias, biasV := h.put(dc.param, h.normal(C, 0.1))
		out, _ := h.put(dc.act, nanFill(N*C))
		mean, _ := h.put(backend.F32, nanFill(N))
		rstd, _ := h.put(backend.F32, nanFill(N))
		h.be.LayerNormForward(out, mean, rstd, inp, weight, bias, N, C)
		want, wantMean, wantRstd := make([]float64, N*C), make([]float64, N), make([]float64, N)
		RefLayerNormForward(want, wantMean, wantRstd, inpV, weightV, biasV, N, C)
		check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-5))
		check(h.t, "mean", h.get(mean), wantMean, tolFor(backend.F32, wantMean, 1e-5))
		check(h.t, "rstd", h.get(rstd), wantRstd, tolFor(backend.F32, wantRstd, 1e-5))

		dout, doutV := h.put(dc.act, h.normal(N*C, 1))
		dinp, _ := h.put(dc.act, nanFill(N*C)) // = semantics: garbage must not leak
		dweight, dweightV := h.put(dc.param, h.normal(C, 1))
		dbias, dbiasV := h.put(dc.param, h.normal(C, 1))
		h.be.LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
		gi, gw, gb := make([]float64, N*C), make([]float64, C), make([]float64, C)
		RefLayerNormBackward(gi, gw, gb, doutV, inpV, weightV, wantMean, wantRstd, N, C)
		gotI, gotW, gotB := h.get(dinp), h.get(dweight), h.get(dbias)
		check(h.t, "dinp", gotI, gi, tolFor(dc.act, gi, 1e-5))
		check(h.t, "dweight", gotW, add(dweightV, gw), tolFor(dc.param, add(dweightV, gw), 1e-5))
		check(h.t, "dbias", gotB, add(dbiasV, gb), tolFor(dc.param, add(dbiasV, gb), 1e-5))
		frozen, _ := h.put(dc.act, nanFill(N*C)) // a frozen norm: the same dinp, no gradients
		h.be.LayerNormBackward(frozen, backend.Buffer{}, backend.Buffer{}, dout, inp, weight, mean, rstd, N, C)
		same(h.t, "dinp of a frozen norm", h.get(frozen), gotI)

		if s.finiteDiffOK && dc.act == backend.F32 && dc.param == backend.F32 {
			o, m, r := make([]float64, N*C), make([]float64, N), make([]float64, N)
			L := func() float64 { RefLayerNormForward(o, m, r, inpV, weightV, biasV, N, C); return project(o, doutV) }
			fdI, fdW, fdB := finiteDiff(inpV, L), finiteDiff(weightV, L), finiteDiff(biasV, L)
			check(h.t, "ref dinp vs finite differences", gi, fdI, fdTol(fdI))
			check(h.t, "ref dweight vs finite differences", gw, fdW, fdTol(fdW))
			check(h.t, "ref dbias vs finite differences", gb, fdB, fdTol(fdB))
			check(h.t, "dinp vs finite differences", gotI, fdI, tolFor(backend.F32, fdI, 1e-5))
			check(h.t, "dweight vs finite differences", sub(gotW, dweightV), fdW, tolFor(backend.F32, fdW, 1e-5))
			check(h.t, "dbias vs finite differences", sub(gotB, dbiasV), fdB, tolFor(backend.F32, fdB, 1e-5))
		}
	})
}
