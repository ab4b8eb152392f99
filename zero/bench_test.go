package zero_test

import (
	"context"
	"testing"
	"time"

	"github.com/gotrain/gotrain/model"
)

// benchmarkStep times whole optimizer steps (gas micro-batches of forward
// and backward, the loss average and Step) of two ranks training together
// over loopback TCP, each rank on one CPU thread, and reports ms/step.
func benchmarkStep(b *testing.B, cfg model.Config, stage, B, T int) {
	const world = 2
	envs := newWorld(b, world)
	r := testRun(cfg, world, 1)
	r.B, r.T, r.globalRows = B, T, world*B
	o := stageOptions(cfg, world, stage, stage >= 2)
	ctx := context.Background()
	ranks := make([]*rankState, world)
	for rank := range world {
		s, err := newRank(ctx, envs[rank], r, o)
		if err != nil {
			b.Fatal(err)
		}
		ranks[rank] = s
		defer s.close()
	}
	stepAll := func(step int) {
		if err := firstErr(onEveryRank(world, func(rank int) error {
			_, err := ranks[rank].step(ctx, r, step, rank)
			return err
		})); err != nil {
			b.Fatal(err)
		}
	}
	stepAll(1) // first-touch allocations (activations, windows) out of the timing
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		stepAll(i + 2)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1e3/float64(b.N), "ms/step")
}

// The equivalence test's model and batches: L2 C32, B=2 T=8, two
// micro-batches per step.
func BenchmarkStepStage0World2(b *testing.B) { benchmarkStep(b, smallGPT2(), 0, 2, 8) }
func BenchmarkStepStage1World2(b *testing.B) { benchmarkStep(b, smallGPT2(), 1, 2, 8) }
func BenchmarkStepStage2World2(b *testing.B) { benchmarkStep(b, smallGPT2(), 2, 2, 8) }
func BenchmarkStepStage3World2(b *testing.B) { benchmarkStep(b, smallGPT2(), 3, 2, 8) }

// A wider model (L4 C128, V 2048, B=4 T=64), where compute rather than
// message latency dominates a step.
func wideGPT2() model.Config {
	return model.GPT2(model.Config{MaxT: 64, V: 2048, Vp: 2048, L: 4, NH: 4, C: 128})
}

func BenchmarkStepStage0World2L4C128(b *testing.B) { benchmarkStep(b, wideGPT2(), 0, 4, 64) }
func BenchmarkStepStage3World2L4C128(b *testing.B) { benchmarkStep(b, wideGPT2(), 3, 4, 64) }
