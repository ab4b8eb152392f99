package zero_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/zero"
)

// TestNonFiniteGradientNamesTheTensor: an Inf in one element of one tensor's
// gradient makes Step fail with a NonFiniteError that names exactly that
// tensor, at every stage.
func TestNonFiniteGradientNamesTheTensor(t *testing.T) {
	groups := []zero.Group{
		{Off: 0, Len: 10, Tensors: []zero.Tensor{{Off: 0, Len: 6, Decay: true}, {Off: 6, Len: 4}}},
		{Off: 10, Len: 7, Tensors: []zero.Tensor{{Off: 10, Len: 3}, {Off: 13, Len: 4, Decay: true}}},
	}
	for stage := 0; stage <= 3; stage++ {
		be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
		o := zero.DefaultOptions(stage)
		o.PersistenceThreshold = 0
		eng, err := zero.New(context.Background(), be, comm.NewSolo(be), zero.Layout{Groups: groups, Forward: []int{0, 1}, Backward: []int{0, 1}}, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.InitParams(func(g int) ([]float32, error) { return make([]float32, groups[g].Len), nil }); err != nil {
			t.Fatal(err)
		}
		if err := eng.ZeroGrad(); err != nil {
			t.Fatal(err)
		}
		for g := range groups {
			_, buf, err := eng.Acquire(g, true)
			if err != nil {
				t.Fatal(err)
			}
			if g == 1 { // the second tensor of group 1, its third element
				vals := make([]float32, groups[1].Len)
				vals[3+2] = float32(math.Inf(1))
				if err := backend.WriteF32(be, buf.Slice(0, groups[1].Len), vals); err != nil {
					t.Fatal(err)
				}
			}
			if err := eng.Release(g, true); err != nil {
				t.Fatal(err)
			}
		}
		_, err = eng.Step(context.Background(), zero.StepInput{AdamW: backend.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1}})
		var nf *zero.NonFiniteError
		if !errors.As(err, &nf) || !errors.Is(err, zero.ErrNonFiniteGradients) {
			t.Fatalf("stage %d: %v, want a NonFiniteError", stage, err)
		}
		if len(nf.Tensors) != 1 || nf.Tensors[0] != (zero.TensorRef{Group: 1, Tensor: 1}) {
			t.Errorf("stage %d: non-finite tensors %v, want [{1 1}]", stage, nf.Tensors)
		}
		eng.Close()
	}
}
