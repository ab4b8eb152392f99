package zero_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// A NaN gradient on one rank reaches every rank through the reduction:
// every rank skips the step alike (ErrNonFiniteGradients, weights
// unchanged), and the next step trains again.
func TestNonFiniteGradientsSkipTheStep(t *testing.T) {
	cfg := smallGPT2()
	const world = 2
	for stage := range 4 {
		t.Run(fmt.Sprintf("stage%d", stage), func(t *testing.T) {
			envs := newWorld(t, world)
			r := testRun(cfg, world, 3)
			o := stageOptions(cfg, world, stage, stage >= 2)
			errs := onEveryRank(world, func(rank int) error {
				ctx := context.Background()
				s, err := newRank(ctx, envs[rank], r, o)
				if err != nil {
					return err
				}
				defer s.close()
				if _, err := s.step(ctx, r, 1, rank); err != nil {
					return err
				}
				before, err := s.eng.HostParams(ctx)
				if err != nil {
					return err
				}
				in, tg := r.batch(2, 0)
				if _, err := s.m.Forward(r.rows(in, rank), r.rows(tg, rank), r.B, r.T); err != nil {
					return err
				}
				dloss := float32(1e-3)
				if rank == 1 {
					dloss = float32(math.NaN())
				}
				if err := s.m.Backward(dloss); err != nil {
					return err
				}
				norm, err := s.eng.Step(ctx, zero.StepInput{AdamW: r.adam.Params(2), ClipNorm: r.clip})
				if !errors.Is(err, zero.ErrNonFiniteGradients) || !math.IsNaN(norm) {
					return fmt.Errorf("step with a NaN gradient: norm %v, %v; want a NaN norm and ErrNonFiniteGradients", norm, err)
				}
				after, err := s.eng.HostParams(ctx)
				if err != nil {
					return err
				}
				if !slices.Equal(before, after) {
					return errors.New("the skipped step changed the weights")
				}
				res, err := s.step(ctx, r, 2, rank)
				if err != nil {
					return fmt.Errorf("the step after the skip: %w", err)
				}
				if math.IsNaN(res.norm) || math.IsNaN(res.loss) || res.norm == 0 {
					return fmt.Errorf("the step after the skip: loss %v norm %v", res.loss, res.norm)
				}
				return nil
			})
			if err := firstErr(errs); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// With bf16 parameters every stage updates an fp32 master and stores its
// round-to-nearest-even bf16 value as the parameter: after training, each
// rank's parameters are exactly bf16(master) over the part it owns.
func TestBF16ParamsAreRoundedMaster(t *testing.T) {
	cfg := smallGPT2()
	const world = 2
	lay := model.NewLayout(cfg)
	for stage := range 4 {
		t.Run(fmt.Sprintf("stage%d", stage), func(t *testing.T) {
			envs := newWorld(t, world)
			r := testRun(cfg, world, 3)
			o := stageOptions(cfg, world, stage, stage >= 2)
			o.ParamDType = backend.BF16
			losses := make([][]float64, world)
			errs := onEveryRank(world, func(rank int) error {
				ctx := context.Background()
				env := envs[rank]
				eng, err := zero.New(ctx, env.be, env.c, zero.LayoutOf(lay), o)
				if err != nil {
					return err
				}
				defer eng.Close()
				if err := eng.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, r.seed, g), nil }); err != nil {
					return err
				}
				m, err := model.New(env.be, cfg, model.Options{ActDType: backend.F32, Store: eng})
				if err != nil {
					return err
				}
				defer m.Free()
				s := &rankState{env: env, m: m, eng: eng, lay: lay}
				for step := 1; step <= r.steps; step++ {
					res, err := s.step(ctx, r, step, rank)
					if err != nil {
						return err
					}
					losses[rank] = append(losses[rank], res.loss)
				}
				params, err := eng.HostParams(ctx)
				if err != nil {
					return err
				}
				master, err := backend.ReadF32(env.be, eng.Master())
				if err != nil {
					return err
				}
				checked := 0
				for _, cr := range eng.Partition() {
					gOff, _ := lay.GroupRange(cr.Group)
					for i := range cr.Len {
						want := backend.F32FromBF16(backend.BF16FromF32(master[cr.PartOff+i]))
						if got := params[gOff+cr.Off+i]; got != want {
							return fmt.Errorf("group %d element %d: parameter %v, bf16 of the master %v", cr.Group, cr.Off+i, got, want)
						}
						checked++
					}
				}
				if want := lay.NumParams(); stage >= 1 && (checked < want/world-lay.NumGroups() || checked > want/world+lay.NumGroups()) {
					return fmt.Errorf("checked %d elements, about Ψ/N = %d expected", checked, want/world)
				} else if stage == 0 && checked != want {
					return fmt.Errorf("checked %d elements, want all %d", checked, want)
				}
				return nil
			})
			if err := firstErr(errs); err != nil {
				t.Fatal(err)
			}
			if losses[0][r.steps-1] >= losses[0][0] {
				t.Errorf("bf16 training did not lower the loss: %v", losses[0])
			}
		})
	}
}
