package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// matmulCase is one (N, C, OC) with or without bias and dinp/dbias outputs.
type matmulCase struct {
	N, C, OC     int
	bias, dinp   bool
	finiteDiffOK bool
}

func matmulCases() []matmulCase {
	return []matmulCase{
		{N: 21, C: 20, OC: 1, bias: true, dinp: true, finiteDiffOK: true},
		{N: 21, C: 20, OC: 13, bias: true, dinp: true, finiteDiffOK: true},
		{N: 21, C: 7, OC: 60, bias: false, dinp: true, finiteDiffOK: true},
		{N: 5, C: 33, OC: 3, bias: true, dinp: false},
		{N: 256, C: 64, OC: 192, bias: true, dinp: true},
		{N: 130, C: 96, OC: 77, bias: false, dinp: false},
	}
}

func testMatmul(t *testing.T, nb func(*testing.T) backend.Backend) {
	for ci, mc := range matmulCases() {
		for di, dc := range dtypeCases() {
			name := fmt.Sprintf("N%dC%dOC%d/bias=%t/dinp=%t/%s", mc.N, mc.C, mc.OC, mc.bias, mc.dinp, dc.name)
			t.Run(name, func(t *testing.T) {
				testMatmulCase(newHarness(t, nb, uint64(1000+10*ci+di)), mc, dc)
			})
		}
	}
}

func testMatmulCase(h *harness, mc matmulCase, dc dtypeCase) {
	N, C, OC := mc.N, mc.C, mc.OC
	inp, inpV := h.put(dc.act, h.normal(N*C, 1))
	weight, weightV := h.put(dc.param, h.normal(OC*C, 1/math.Sqrt(float64(C))))
	var bias backend.Buffer
	var biasV []float64
	if mc.bias {
		bias, biasV = h.put(dc.param, h.normal(OC, 1))
	}
	out, _ := h.put(dc.act, nanFill(N*OC))
	h.be.MatmulForward(out, inp, weight, bias, N, C, OC)
	want := make([]float64, N*OC)
	RefMatmulForward(want, inpV, weightV, biasV, N, C, OC)
	check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-5))

	dout, doutV := h.put(dc.act, h.normal(N*OC, 1))
	dweight, dweightV := h.put(dc.param, h.normal(OC*C, 1))
	var dinp, dbias backend.Buffer
	var dbiasV, gi, gb []float64
	if mc.dinp {
		dinp, _ = h.put(dc.act, nanFill(N*C))
		gi = make([]float64, N*C)
	}
	if mc.bias {
		dbias, dbiasV = h.put(dc.param, h.normal(OC, 1))
		gb = make([]float64, OC)
	}
	h.be.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
	gw := make([]float64, OC*C)
	RefMatmulBackward(gi, gw, gb, doutV, inpV, weightV, N, C, OC)
	gotW := h.get(dweight)
	check(h.t, "dweight", gotW, add(dweightV, gw), tolFor(dc.param, add(dweightV, gw), 1e-5))
	var gotI, gotB []float64
	if mc.dinp {
		gotI = h.get(dinp)
		check(h.t, "dinp", gotI, gi, tolFor(dc.act, gi, 1e-5))
	}
	if mc.bias {
		gotB = h.get(dbias)
		check(h.t, "dbias", gotB, add(dbiasV, gb), tolFor(dc.param, add(dbiasV, gb), 1e-5))
	}
	if mc.dinp { // a frozen weight: no weight or bias gradient, the same dinp
		frozen, _ := h.put(dc.act, nanFill(N*C))
		h.be.MatmulBackward(frozen, backend.Buffer{}, backend.Buffer{}, dout, inp, weight, N, C, OC)
		same(h.t, "dinp with a frozen weight", h.get(frozen), gotI)
	}

	if mc.finiteDiffOK && dc.act == backend.F32 && dc.param == backend.F32 {
		o := make([]float64, N*OC)
		L := func() float64 { RefMatmulForward(o, inpV, weightV, biasV, N, C, OC); return project(o, doutV) }
		fdW := finiteDiff(weightV, L)
		check(h.t, "ref dweight vs finite differences", gw, fdW, fdTol(fdW))
		check(h.t, "dweight vs finite differences", sub(gotW, dweightV), fdW, tolFor(backend.F32, fdW, 1e-5))
		if mc.dinp {
			fdI := finiteDiff(inpV, L)
			check(h.t, "ref dinp vs finite differences", gi, fdI, fdTol(fdI))
			check(h.t, "dinp vs finite differences", gotI, fdI, tolFor(backend.F32, fdI, 1e-5))
		}
		if mc.bias {
			fdB := finiteDiff(biasV, L)
			check(h.t, "ref dbias vs finite differences", gb, fdB, fdTol(fdB))
			check(h.t, "dbias vs finite differences", sub(gotB, dbiasV), fdB, tolFor(backend.F32, fdB, 1e-5))
		}
	}
}
