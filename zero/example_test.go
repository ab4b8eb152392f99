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

// One training step of a model whose parameters a ZeRO engine holds, on
// the CPU backend. A single process is a world of one rank (comm.NewSolo)
// at stage 0; on many ranks the same calls run with another Comm and
// stage. The model takes its parameters and gradients from the engine; the
// engine reduces the gradients, clips them and steps AdamW. The step:
// zero the gradients; forward and backward; step.
func ExampleEngine() {
	ctx := context.Background()
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	cfg := model.GPT2(model.Config{MaxT: 8, V: 16, Vp: 16, L: 1, NH: 2, C: 8})
	lay := model.NewLayout(cfg)
	eng, err := zero.New(ctx, be, comm.NewSolo(be), zero.LayoutOf(lay), zero.DefaultOptions(0))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close()
	if err := eng.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, 1, g), nil }); err != nil {
		fmt.Println(err)
		return
	}
	m, err := model.New(be, cfg, model.Options{Store: eng})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Free()

	inputs := []int32{1, 2, 3, 4, 5, 6, 7, 8} // B = 1 row of T = 8 tokens
	targets := []int32{2, 3, 4, 5, 6, 7, 8, 9}
	adam := optim.AdamWConfig{LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, AdamWMode: true}
	if err := eng.ZeroGrad(); err != nil {
		fmt.Println(err)
		return
	}
	loss, err := m.Forward(inputs, targets, 1, 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Backward(1.0 / 8); err != nil { // the gradient of the mean over the 8 targets
		fmt.Println(err)
		return
	}
	norm, err := eng.Step(ctx, zero.StepInput{AdamW: adam.Params(1), ClipNorm: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	after, err := m.Forward(inputs, targets, 1, 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("loss %.2f (ln 16 = 2.77: an untrained model guesses)\n", loss)
	fmt.Printf("gradient norm %.2f, clipped to 1\n", norm)
	fmt.Printf("loss after the step %.2f\n", after)
	// Output:
	// loss 2.82 (ln 16 = 2.77: an untrained model guesses)
	// gradient norm 1.69, clipped to 1
	// loss after the step 2.58
}
