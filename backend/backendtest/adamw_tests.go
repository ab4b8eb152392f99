package backendtest

import (
	"fmt"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// adamwCase is a storage layout of one AdamW update.
type adamwCase struct {
	param, grad backend.DType
	master      bool
}

func adamwCases() []adamwCase {
	return []adamwCase{
		{backend.F32, backend.F32, false},
		{backend.F32, backend.F32, true},
		{backend.BF16, backend.F32, true},
		{backend.BF16, backend.BF16, true},
		{backend.F16, backend.F32, true},
		{backend.BF16, backend.BF16, false},
		{backend.F16, backend.F16, false},
	}
}

func testAdamW(t *testing.T, nb func(*testing.T) backend.Backend) {
	for ci, ac := range adamwCases() {
		t.Run(fmt.Sprintf("param=%s/grad=%s/master=%t", ac.param, ac.grad, ac.master), func(t *testing.T) {
			testAdamWCase(newHarness(t, nb, uint64(2000+ci)), ac)
		})
	}
}

func testAdamWCase(h *harness, ac adamwCase) {
	const n = 100_003 // spans several chunks of any fan-out, and odd
	const steps = 5
	param, state := h.put(ac.param, h.normal(n, 1)) // state: the float64 reference weights
	var master backend.Buffer
	if ac.master {
		master, _ = h.put(backend.F32, state)
	}
	m, _ := h.put(backend.F32, make([]float64, n))
	v, _ := h.put(backend.F32, make([]float64, n))
	refM, refV := make([]float64, n), make([]float64, n)
	for step := 1; step <= steps; step++ {
		p := backend.AdamWParams{
			LR: 1e-2 * float32(step), Beta1: 0.9, Beta2: 0.95, Eps: 1e-8,
			WeightDecay: 0.1, GradScale: 0.5, Step: step,
		}
		if step == 3 {
			p.WeightDecay = 0 // an undecayed tensor
		}
		gs := h.normal(n, 1)
		for i := 0; i < n; i += 7 {
			// Gradients as small as eps make √v̂ ≈ eps, where eps inside
			// or outside the square root gives very different updates.
			gs[i] *= 2e-8
		}
		gs[1] = 0
		grad, gradV := h.put(ac.grad, gs)
		h.be.AdamW(param, master, grad, m, v, p)
		RefAdamW(state, gradV, refM, refV, p)
		if !ac.master && ac.param != backend.F32 {
			for i, x := range state { // the parameter is stored rounded every step
				state[i] = float64(roundTo(ac.param, float32(x)))
			}
		}
		check(h.t, fmt.Sprintf("step %d m", step), h.get(m), refM, tolFor(backend.F32, refM, 1e-5))
		check(h.t, fmt.Sprintf("step %d v", step), h.get(v), refV, tolFor(backend.F32, refV, 1e-5))
		got := h.get(param)
		if ac.master {
			gotMaster := h.get(master)
			check(h.t, fmt.Sprintf("step %d master", step), gotMaster, state, tolFor(backend.F32, state, 1e-6))
			for i, x := range gotMaster {
				if want := float64(roundTo(ac.param, float32(x))); got[i] != want {
					h.t.Fatalf("step %d: param[%d] = %g, want master %g rounded to %s = %g", step, i, got[i], x, ac.param, want)
				}
			}
		} else {
			tl := tolFor(ac.param, state, 1e-6)
			if ac.param != backend.F32 {
				// Rounding each step may land one ulp (up to 2^-7 relative
				// for bf16) either side of the reference's rounding.
				tl.rel = 4 * relFor(ac.param)
			}
			check(h.t, fmt.Sprintf("step %d param", step), got, state, tl)
		}
	}
}
