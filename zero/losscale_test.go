package zero_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/zero"
)

// Backward with dloss·S and Step with LossScale S is the unscaled step:
// Step reports the unscaled norm and divides S out with the clip
// coefficient. Multiplying by a power of two commutes with every rounding
// in backward, the reductions and the norm, so S = 2^10 must give the same
// losses, norms, weights and optimizer state bit for bit; S = 3 changes
// the roundings, so only fp32-level agreement is expected. The runs clip,
// so the combined unscale-and-clip rule is what is compared.
func TestLossScaleMatchesUnscaled(t *testing.T) {
	cfg := smallGPT2()
	const world, steps = 2, 4
	envs := newWorld(t, world)
	cases := []offloadCase{
		{stage: 0}, {stage: 1}, {stage: 2, overlap: true}, {stage: 3, overlap: true},
		{stage: 2, oo: true}, {stage: 3, oo: true, op: true, overlap: true},
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			r := testRun(cfg, world, steps)
			want := trainOffloadCase(t, envs, r, c)
			clipped := false
			for _, s := range want.results[0] {
				clipped = clipped || s.norm > r.clip
			}
			if !clipped {
				t.Fatal("the unscaled run never clips; the test would not cover the combined rule")
			}
			r.lossScale = 1024
			got := trainOffloadCase(t, envs, r, c)
			for rank := range world {
				if !slices.Equal(got.results[rank], want.results[rank]) {
					t.Errorf("rank %d, loss scale 1024: steps %v, unscaled %v", rank, got.results[rank], want.results[rank])
				}
				for name, pair := range map[string][2][]float32{
					"weights": {got.params[rank], want.params[rank]},
					"master":  {got.master[rank], want.master[rank]},
					"m":       {got.m[rank], want.m[rank]},
					"v":       {got.v[rank], want.v[rank]},
				} {
					if !slices.Equal(pair[0], pair[1]) {
						t.Errorf("rank %d, loss scale 1024: the %s differ from the unscaled run", rank, name)
					}
				}
			}
			r.lossScale = 3
			got = trainOffloadCase(t, envs, r, c)
			for rank := range world {
				for i, g := range got.results[rank] {
					w := want.results[rank][i]
					if relDiff(g.loss, w.loss) > 1e-5 || relDiff(g.norm, w.norm) > 1e-5 {
						t.Errorf("rank %d step %d, loss scale 3: loss %.8f norm %.8f, unscaled %.8f and %.8f", rank, i+1, g.loss, g.norm, w.loss, w.norm)
					}
				}
				checkWeights(t, cfg, rank, got.params[rank], want.params[rank])
			}
		})
	}
}

// An overflow under a loss scale (an infinite dloss on one rank, as fp16
// backward produces) skips the step on every rank with
// ErrNonFiniteGradients and leaves the weights alone, offloaded or not;
// the next step, at a lower scale, trains.
func TestLossScaleOverflowSkipsTheStep(t *testing.T) {
	cfg := smallGPT2()
	const world = 2
	envs := newWorld(t, world)
	for _, c := range []offloadCase{{stage: 1}, {stage: 2, oo: true, overlap: true}, {stage: 3, oo: true, op: true, overlap: true}} {
		t.Run(c.String(), func(t *testing.T) {
			r := testRun(cfg, world, 2)
			r.lossScale = 1 << 16
			errs := onEveryRank(world, func(rank int) error {
				ctx := context.Background()
				s, err := newRank(ctx, envs[rank], r, c.options(cfg, world))
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
				dloss := float32(r.lossScale / float64(r.B*r.T*r.world))
				if rank == 0 {
					dloss = float32(math.Inf(1))
				}
				if err := s.m.Backward(dloss); err != nil {
					return err
				}
				norm, err := s.eng.Step(ctx, zero.StepInput{AdamW: r.adam.Params(2), ClipNorm: r.clip, LossScale: r.lossScale})
				if !errors.Is(err, zero.ErrNonFiniteGradients) || !(math.IsNaN(norm) || math.IsInf(norm, 0)) {
					return fmt.Errorf("step with an overflowed gradient: norm %v, %v; want a non-finite norm and ErrNonFiniteGradients", norm, err)
				}
				after, err := s.eng.HostParams(ctx)
				if err != nil {
					return err
				}
				if !slices.Equal(before, after) {
					return errors.New("the skipped step changed the weights")
				}
				lower := r // this rank's copy: r is shared by the ranks
				lower.lossScale /= 2
				res, err := s.step(ctx, lower, 2, rank)
				if err != nil {
					return fmt.Errorf("the step after the skip: %w", err)
				}
				if math.IsNaN(res.norm) || res.norm == 0 || math.IsNaN(res.loss) {
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

// A loss scale that is negative, NaN or infinite is a caller's mistake.
func TestLossScaleMustBePositive(t *testing.T) {
	cfg := smallGPT2()
	envs := newWorld(t, 1)
	r := testRun(cfg, 1, 1)
	ctx := context.Background()
	s, err := newRank(ctx, envs[0], r, zero.DefaultOptions(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, scale := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := s.eng.Step(ctx, zero.StepInput{AdamW: r.adam.Params(1), LossScale: scale})
		if err == nil || errors.Is(err, zero.ErrNonFiniteGradients) {
			t.Errorf("loss scale %v: %v; want a usage error", scale, err)
		}
	}
}
