package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// RunDropout runs the tests of backend.Dropouter as subtests of t when the
// backends newBackend returns implement it, and reports whether they did.
func RunDropout(t *testing.T, newBackend func(*testing.T) backend.Backend) bool {
	if _, ok := newBackend(t).(backend.Dropouter); !ok {
		return false
	}
	for si, n := range []int{1, 37, 1000, 4099} {
		for di, dc := range dtypeCases() {
			t.Run(fmt.Sprintf("N%d/%s", n, dc.name), func(t *testing.T) {
				testDropout(newHarness(t, newBackend, uint64(5000+10*si+di)), n, dc)
			})
		}
	}
	t.Run("rate", func(t *testing.T) { testDropoutRate(newHarness(t, newBackend, 5999)) })
	return true
}

// testDropout checks out against the mask's definition (backend.DropoutKeep)
// in float64 for several p, out-of-place from activations into the
// parameter dtype (the casts LoRA's fp32 adapters use) and in place, and
// that p = 0 copies.
func testDropout(h *harness, n int, dc dtypeCase) {
	ops := h.be.(backend.Dropouter)
	inp, inpV := h.put(dc.act, h.normal(n, 1))
	for _, p := range []float32{0, 0.1, 0.5, 0.9} {
		seed := uint64(n)*1000 + uint64(p*100)
		out, _ := h.put(dc.param, nanFill(n))
		ops.Dropout(out, inp, p, seed, n)
		want := make([]float64, n)
		th, s := backend.DropoutThreshold(p), float64(backend.DropoutScale(p))
		for i, v := range inpV {
			if backend.DropoutKeep(seed, int64(i), th) {
				want[i] = v * s
			}
		}
		got := h.get(out)
		check(h.t, fmt.Sprintf("dropout p %g", p), got, want, tolFor(dc.param, want, 1e-7))
		for i := range want {
			if (want[i] == 0) != (got[i] == 0) {
				h.t.Fatalf("p %g: element %d is %g, the mask says %g", p, i, got[i], want[i])
			}
		}
		// In place on the same values gives the same bits.
		inPlace, _ := h.put(dc.act, inpV)
		ops.Dropout(inPlace, inPlace, p, seed, n)
		ref, _ := h.put(dc.act, nanFill(n))
		ops.Dropout(ref, inp, p, seed, n)
		same(h.t, fmt.Sprintf("dropout p %g in place", p), h.get(inPlace), h.get(ref))
	}
}

// testDropoutRate checks the fraction kept over 200,000 elements is 1−p
// within five standard deviations, and that two seeds draw different masks.
func testDropoutRate(h *harness) {
	const n = 200_000
	ops := h.be.(backend.Dropouter)
	ones := make([]float64, n)
	for i := range ones {
		ones[i] = 1
	}
	inp, _ := h.put(backend.F32, ones)
	masks := make([][]float64, 2)
	for k, seed := range []uint64{11, 12} {
		out := h.alloc(backend.F32, n)
		const p = 0.3
		ops.Dropout(out, inp, p, seed, n)
		masks[k] = h.get(out)
		kept := 0
		for _, v := range masks[k] {
			if v != 0 {
				kept++
			}
		}
		sd := math.Sqrt(n * p * (1 - p))
		if d := math.Abs(float64(kept) - n*(1-p)); d > 5*sd {
			h.t.Errorf("seed %d: kept %d of %d at p %g, want %g ± %.0f", seed, kept, n, p, n*(1-p), 5*sd)
		}
	}
	agree := 0
	for i := range masks[0] {
		if (masks[0][i] == 0) == (masks[1][i] == 0) {
			agree++
		}
	}
	// Independent masks at p 0.3 agree on 0.7² + 0.3² = 58% of elements.
	if f := float64(agree) / n; math.Abs(f-0.58) > 0.01 {
		h.t.Errorf("masks of seeds 11 and 12 agree on %.3f of the elements, want 0.58 (independent)", f)
	}
}
