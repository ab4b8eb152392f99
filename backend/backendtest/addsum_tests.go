package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// testAddSum adds two vectors of per-token losses into one accumulator, as
// the trainer does over micro-batches, and compares with the float64 sum.
func testAddSum(t *testing.T, nb func(*testing.T) backend.Backend) {
	h := newHarness(t, nb, 11)
	for _, n := range []int{1, 7, 300, 4099} {
		acc, _ := h.put(backend.F32, []float64{0.25})
		want := 0.25
		for k := range 2 {
			x, xv := h.put(backend.F32, h.normal(n, float64(k+1)))
			h.be.AddSum(acc, x)
			for _, v := range xv {
				want += v
			}
		}
		check(t, "acc", h.get(acc), []float64{want}, tol{abs: 1e-6 * float64(n), rel: 1e-6})
	}
}
