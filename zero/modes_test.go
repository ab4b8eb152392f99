package zero_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/optim"
	"github.com/gotrain/gotrain/zero"
)

// soloTrain runs steps training steps of smallGPT2 on one rank with o and
// returns the losses, the final parameters and the device peak.
func soloTrain(t *testing.T, o zero.Options, steps int) ([]float32, []float32, int64) {
	t.Helper()
	cfg := smallGPT2()
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	lay := model.NewLayout(cfg)
	eng, err := zero.New(context.Background(), be, comm.NewSolo(be), zero.LayoutOf(lay), o)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := eng.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, 3, g), nil }); err != nil {
		t.Fatal(err)
	}
	m, err := model.New(be, cfg, model.Options{Store: eng})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	adam := optim.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, AdamWMode: true}
	rng := rand.New(rand.NewPCG(5, 6))
	const B, T = 2, 8
	var losses []float32
	for step := 1; step <= steps; step++ {
		if err := eng.ZeroGrad(); err != nil {
			t.Fatal(err)
		}
		in, tg := make([]int32, B*T), make([]int32, B*T)
		for i := range in {
			in[i], tg[i] = int32(rng.IntN(cfg.V)), int32(rng.IntN(cfg.V))
		}
		loss, err := m.Forward(in, tg, B, T)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(1 / float32(B*T)); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Step(context.Background(), zero.StepInput{AdamW: adam.Params(step), ClipNorm: 1}); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss)
	}
	p, err := eng.HostParams(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return losses, p, be.Memory().Peak[backend.Device]
}

// TestLazyCommSameResultsMostMemory: running collectives only when waited
// for changes no value, and the memory held is at least what the eager
// comm goroutine reaches (reductions finish only when they must).
func TestLazyCommSameResultsMostMemory(t *testing.T) {
	for stage := range 4 {
		o := zero.DefaultOptions(stage)
		o.OverlapComm = stage >= 2
		eagerLoss, eagerP, eagerPeak := soloTrain(t, o, 3)
		o.LazyComm = true
		lazyLoss, lazyP, lazyPeak := soloTrain(t, o, 3)
		for i := range eagerLoss {
			if math.Float32bits(eagerLoss[i]) != math.Float32bits(lazyLoss[i]) {
				t.Errorf("stage %d step %d: loss %v lazy, %v eager", stage, i+1, lazyLoss[i], eagerLoss[i])
			}
		}
		for i := range eagerP {
			if math.Float32bits(eagerP[i]) != math.Float32bits(lazyP[i]) {
				t.Fatalf("stage %d: parameter %d is %v lazy, %v eager", stage, i, lazyP[i], eagerP[i])
			}
		}
		if lazyPeak < eagerPeak {
			t.Errorf("stage %d: lazy peak %d bytes below the eager %d", stage, lazyPeak, eagerPeak)
		}
	}
}

// TestInferenceEngine holds the parameters only: no gradients, master or
// moments are allocated, and a backward pass or a step is refused.
func TestInferenceEngine(t *testing.T) {
	cfg := smallGPT2()
	lay := model.NewLayout(cfg)
	for _, stage := range []int{0, 3} {
		be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
		o := zero.DefaultOptions(stage)
		o.Inference = true
		eng, err := zero.New(context.Background(), be, comm.NewSolo(be), zero.LayoutOf(lay), o)
		if err != nil {
			t.Fatal(err)
		}
		held := be.Memory().Current[backend.Device]
		if held[backend.Grads]+held[backend.Master]+held[backend.Optimizer] != 0 {
			t.Errorf("stage %d: an inference engine holds %+v", stage, held)
		}
		if held[backend.Params] < int64(4*lay.NumParams()) && stage == 0 {
			t.Errorf("stage %d: parameters %d bytes, want %d", stage, held[backend.Params], 4*lay.NumParams())
		}
		if _, _, err := eng.Acquire(1, true); err == nil || !strings.Contains(err.Error(), "inference") {
			t.Errorf("stage %d: backward acquire: %v", stage, err)
		}
		eng.Close()
	}
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	o := zero.DefaultOptions(0)
	o.Inference = true
	eng, _ := zero.New(context.Background(), be, comm.NewSolo(be), zero.LayoutOf(lay), o)
	defer eng.Close()
	if _, err := eng.Step(context.Background(), zero.StepInput{AdamW: backend.AdamWParams{Step: 1}}); err == nil {
		t.Error("an inference engine stepped")
	}
}

// TestFrozenEngine checks a Frozen engine (LoRA's base): it holds only
// parameters, serves backward acquisitions with the zero Buffer for the
// gradients, cannot step, and an engine built beside it shares its comm
// goroutine and closes without stopping it.
func TestFrozenEngine(t *testing.T) {
	cfg := smallGPT2()
	lay := model.NewLayout(cfg)
	for _, stage := range []int{0, 3} {
		be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
		o := zero.DefaultOptions(stage)
		o.Frozen = true
		eng, err := zero.New(context.Background(), be, comm.NewSolo(be), zero.LayoutOf(lay), o)
		if err != nil {
			t.Fatal(err)
		}
		held := be.Memory().Current[backend.Device]
		if held[backend.Grads]+held[backend.Master]+held[backend.Optimizer] != 0 {
			t.Errorf("stage %d: a frozen engine holds %+v", stage, held)
		}
		for _, g := range lay.AcquisitionOrder(true) {
			p, grads, err := eng.Acquire(g, true)
			if err != nil {
				t.Fatalf("stage %d: backward acquire of group %d: %v", stage, g, err)
			}
			if _, n := lay.GroupRange(g); p.Len() != n || !grads.IsNil() {
				t.Errorf("stage %d: group %d: %d parameters (want %d), gradients %v (want none)", stage, g, p.Len(), n, grads)
			}
			if err := eng.Release(g, true); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := eng.Step(context.Background(), zero.StepInput{AdamW: backend.AdamWParams{Step: 1}}); err == nil {
			t.Errorf("stage %d: a frozen engine stepped", stage)
		}
		beside, err := zero.NewBeside(eng, zero.LayoutOf(lay), zero.DefaultOptions(stage))
		if err != nil {
			t.Fatal(err)
		}
		if err := beside.Close(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := eng.Acquire(0, false); err != nil {
			t.Errorf("stage %d: the first engine after closing the one beside it: %v", stage, err)
		}
		eng.Close()
	}
}
