package zero_test

import (
	"context"
	"fmt"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/optim"
	"github.com/gotrain/gotrain/zero"
)

// A single process trains with a one-rank engine: comm.NewSolo for the
// collectives and stage 0, so the same model code runs as under ZeRO on
// many ranks. The model takes its parameters and gradients from the
// engine; the engine steps AdamW on them.
func ExampleEngine() {
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	cfg := model.GPT2(model.Config{MaxT: 8, V: 16, Vp: 16, L: 1, NH: 2, C: 8})
	lay := model.NewLayout(cfg)
	eng, err := zero.New(context.Background(), be, comm.NewSolo(be), zero.LayoutOf(lay), zero.DefaultOptions(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()
	eng.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, 1, g), nil })
	m, err := model.New(be, cfg, model.Options{Store: eng})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Free()

	adam := optim.AdamWConfig{LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, AdamWMode: true}
	inputs := []int32{1, 2, 3, 4, 5, 6, 7, 8}
	targets := []int32{2, 3, 4, 5, 6, 7, 8, 9}
	for step := 1; step <= 30; step++ {
		eng.ZeroGrad()
		loss, _ := m.Forward(inputs, targets, 1, 8)
		m.Backward(1.0 / 8) // the gradient of the mean over the 8 tokens
		eng.Step(context.Background(), zero.StepInput{AdamW: adam.Params(step), ClipNorm: 1})
		if step == 1 || step == 30 {
			fmt.Printf("step %d: loss %.1f\n", step, loss)
		}
	}
	// Output:
	// step 1: loss 2.8
	// step 30: loss 0.0
}
