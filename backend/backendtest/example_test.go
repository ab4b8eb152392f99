package backendtest_test

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/backendtest"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// A backend proves itself with one test in its own package that hands Run
// a constructor; Run calls it for every subtest, so each starts from a
// fresh Backend with nothing allocated, and frees what it allocates:
//
//	func TestBackend(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backend.Backend {
//			return mybackend.New(mybackend.Options{})
//		})
//	}
//
// backend/cpu's TestBackend and backend/cuda's TestBackendSuite are two
// such tests. While an op is being written, the exported float64
// references check it alone, as here for the CPU backend's matmul: upload
// the inputs, run the op, download, compare.
func Example() {
	var be backend.Backend = cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	const N, C, OC = 2, 3, 2
	inp := []float32{1, 2, 3, 4, 5, 6}     // (N, C)
	weight := []float32{1, 0, -1, 2, 1, 0} // (OC, C)
	bias := []float32{10, 20}              // (OC)
	bufs := make([]backend.Buffer, 4)
	for i, n := range []int{N * OC, N * C, OC * C, OC} {
		b, err := be.Alloc(backend.Device, backend.Activations, backend.F32, n)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer be.Free(b)
		bufs[i] = b
	}
	out := bufs[0]
	for i, vals := range [][]float32{inp, weight, bias} {
		if err := backend.WriteF32(be, bufs[i+1], vals); err != nil {
			fmt.Println(err)
			return
		}
	}
	be.MatmulForward(out, bufs[1], bufs[2], bufs[3], N, C, OC)
	got, err := backend.ReadF32(be, out)
	if err != nil {
		fmt.Println(err)
		return
	}

	want := make([]float64, N*OC)
	backendtest.RefMatmulForward(want, f64(inp), f64(weight), f64(bias), N, C, OC)
	fmt.Println("backend:  ", got)
	fmt.Println("reference:", want)
	// Output:
	// backend:   [8 24 8 33]
	// reference: [8 24 8 33]
}

func f64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}
