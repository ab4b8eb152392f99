package compare

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// accumulating is the CPU backend with GELU backward adding into dinp
// instead of overwriting it, the bug an activation gradient written with
// += instead of = makes.
type accumulating struct{ *cpu.Backend }

func (a accumulating) GeluBackward(dinp, inp, dout backend.Buffer, N int) {
	tmp, err := a.Alloc(backend.Device, backend.Activations, dinp.DType(), N)
	if err != nil {
		panic(err)
	}
	defer a.Free(tmp)
	a.Backend.GeluBackward(tmp, inp, dout, N)
	a.Add(dinp, dinp, tmp, N)
}

// Outputs start as random data, not zeros: a backend that accumulates
// into a result it should overwrite differs from the reference.
func TestOutputsStartRandom(t *testing.T) {
	g := accumulating{cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})}
	res, err := Run(g, cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1}), Shapes()[1], Mixes()[0], 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if (r.Tensor == "gelu dinp") == r.OK() {
			t.Errorf("%s: ok %v (max error %.3g)", r.Tensor, r.OK(), r.MaxErr)
		}
	}
}
