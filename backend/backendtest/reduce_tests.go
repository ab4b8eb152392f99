package backendtest

import (
	"fmt"
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testReduce(t *testing.T, nb func(*testing.T) backend.Backend) {
	for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16} {
		for _, n := range []int{1, 7, 100_003} {
			t.Run(fmt.Sprintf("%s/N%d", dt, n), func(t *testing.T) {
				h := newHarness(t, nb, uint64(3000+n)+uint64(dt))
				x, xV := h.put(dt, h.normal(n, 3))
				want := 0.0
				for _, v := range xV {
					want += v * v
				}
				if got := h.be.SumSquares(x); math.Abs(got-want) > 1e-12*want {
					t.Errorf("SumSquares = %.17g, want %.17g", got, want)
				}
				if h.be.NonFinite(x) {
					t.Errorf("NonFinite of finite data = true")
				}
				big := h.alloc(dt, n)
				maxV := map[backend.DType]float64{backend.F32: math.MaxFloat32, backend.BF16: 0x1.fep127, backend.F16: 65504}[dt]
				vals := make([]float32, n)
				for i := range vals {
					vals[i] = float32(maxV)
				}
				if err := backend.WriteF32(h.be, big, vals); err != nil {
					t.Fatal(err)
				}
				if h.be.NonFinite(big) {
					t.Errorf("NonFinite of the largest finite values = true")
				}
				for _, pos := range []int{0, n / 2, n - 1} {
					for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
						y, _ := h.put(dt, h.normal(n, 1))
						one, _ := h.put(dt, []float64{bad})
						h.be.Copy(y.Slice(pos, 1), one)
						if !h.be.NonFinite(y) {
							t.Errorf("NonFinite with %g at %d = false", bad, pos)
						}
						if n > 1 && (pos == 0 || pos == n-1) {
							// A view that excludes the bad element is finite.
							view := y.Slice(1, n-1)
							if pos == n-1 {
								view = y.Slice(0, n-1)
							}
							if h.be.NonFinite(view) {
								t.Errorf("NonFinite of a view excluding %g at %d = true", bad, pos)
							}
						}
					}
				}
			})
		}
	}
}
