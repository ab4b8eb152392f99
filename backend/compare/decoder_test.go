package compare_test

import (
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend/compare"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// TestDecoderOpsCPU runs the comparison between two CPU backends that split
// the work differently (their results agree to rounding), which exercises
// the decoder part of the op sequence, in place until a GPU backend has
// these ops: every shape and mix passes and the decoder tensors are in the
// results.
func TestDecoderOpsCPU(t *testing.T) {
	got := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 3})
	want := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	for si, s := range compare.Shapes() {
		for _, d := range compare.Mixes() {
			res, err := compare.Run(got, want, s, d, uint64(si+1))
			if err != nil {
				t.Fatalf("%s/%s: %v", s, d.Name, err)
			}
			seen := map[string]bool{}
			for _, r := range res {
				if !r.OK() {
					t.Errorf("%s/%s: %s: max error %.3g (tolerance %.3g), %d of %d bad %s",
						s, d.Name, r.Tensor, r.MaxErr, r.Tol, r.Bad, r.N, r.Err)
				}
				for _, op := range []string{"rmsnorm", "residual+rmsnorm", "rotary", "rotary+qknorm", "swiglu"} {
					if strings.HasPrefix(r.Tensor, op+" ") {
						seen[op] = true
					}
				}
			}
			if len(seen) != 5 {
				t.Errorf("%s/%s: decoder ops compared: %v, want all five", s, d.Name, seen)
			}
		}
	}
}
