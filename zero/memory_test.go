package zero_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/model"
)

// deepGPT2 has eight blocks and a small vocabulary, so no single group
// dominates and a stage-3 rank's partition plus a few gathered groups stay
// well below the whole model.
func deepGPT2() model.Config {
	return model.GPT2(model.Config{MaxT: 16, V: 64, Vp: 128, L: 8, NH: 2, C: 32})
}

// The memory acceptance, per rank, from the backend's own
// accounting: stages ≥ 1 hold 12 bytes per partition element of master and
// moments (12Ψ/N up to padding), stages ≥ 2 hold 4 bytes per partition
// element of gradients, and stage 3 holds its parameter partition, the
// persistent groups and the gathered windows only — never the whole model
// for N ≥ 2.
func TestMemoryPerStage(t *testing.T) {
	cfg := deepGPT2()
	lay := model.NewLayout(cfg)
	psi := int64(lay.NumParams())
	for _, world := range []int{1, 2, 4} {
		envs := newWorld(t, world)
		// P = Σ ceil(n_g/N), computed here from the layout.
		var part, finalPadded int64
		for g := range lay.NumGroups() {
			_, n := lay.GroupRange(g)
			part += int64((n + world - 1) / world)
		}
		_, nf := lay.GroupRange(lay.NumGroups() - 1)
		finalPadded = int64(padded(nf, world))
		_, n0 := lay.GroupRange(0)
		_, nb := lay.GroupRange(1)
		maxLive := int64(padded(n0, world) + 2*padded(nb, world))
		if 12*part > 12*(psi/int64(world)+int64(lay.NumGroups())) {
			t.Fatalf("world %d: partition %d is more than Ψ/N plus one element per group", world, part)
		}
		for stage := range 4 {
			t.Run(fmt.Sprintf("world%d/stage%d", world, stage), func(t *testing.T) {
				r := testRun(cfg, world, 1)
				o := stageOptions(cfg, world, stage, stage >= 2)
				o.MaxLiveParameters = maxLive
				type measured struct {
					cur        backend.MemoryStats
					peakParams int64
					peakLive   int
				}
				got := make([]measured, world)
				errs := onEveryRank(world, func(rank int) error {
					ctx := context.Background()
					be := envs[rank].be
					s, err := newRank(ctx, envs[rank], r, o)
					if err != nil {
						return err
					}
					be.resetPeaks()
					if _, err := s.step(ctx, r, 1, rank); err != nil {
						s.close()
						return err
					}
					got[rank] = measured{cur: be.Memory(), peakParams: be.peakOf(backend.Params), peakLive: s.eng.Stats().PeakLiveElements}
					s.close()
					if left := be.Memory().PoolTotal(backend.Device); left != 0 {
						return fmt.Errorf("%d device bytes left after Close", left)
					}
					return nil
				})
				if err := firstErr(errs); err != nil {
					t.Fatal(err)
				}
				for rank, m := range got {
					cur := m.cur.Current[backend.Device]
					state := cur[backend.Master] + cur[backend.Optimizer]
					wantState, wantGrads, wantParams := 8*psi, 4*psi, 4*psi // stage 0
					switch stage {
					case 1:
						wantState, wantGrads, wantParams = 12*part, 4*(int64(world)*part+part), 4*int64(world)*part
					case 2:
						wantState, wantGrads, wantParams = 12*part, 4*part, 4*int64(world)*part
					case 3:
						wantState, wantGrads, wantParams = 12*part, 4*part, 4*(part+finalPadded)
					}
					if state != wantState {
						t.Errorf("rank %d: master+optimizer %d bytes, want %d", rank, state, wantState)
					}
					if cur[backend.Grads] != wantGrads {
						t.Errorf("rank %d: gradients %d bytes, want %d", rank, cur[backend.Grads], wantGrads)
					}
					if cur[backend.Params] != wantParams {
						t.Errorf("rank %d: parameters %d bytes after the step, want %d", rank, cur[backend.Params], wantParams)
					}
					if stage != 3 {
						continue
					}
					// Every gathered window is Params memory on top of the
					// partition and the persistent group, and nothing else is.
					if want := wantParams + 4*int64(m.peakLive); m.peakParams != want {
						t.Errorf("rank %d: parameter peak %d bytes, want partition+persistent %d + gathered %d", rank, m.peakParams, wantParams, 4*m.peakLive)
					}
					if int64(m.peakLive) > maxLive || m.peakLive < padded(n0, world)+padded(nb, world) {
						t.Errorf("rank %d: %d elements gathered at the peak; want at least the embeddings and a block, at most %d", rank, m.peakLive, maxLive)
					}
					if world > 1 && m.peakParams >= 4*psi {
						t.Errorf("rank %d: parameter peak %d bytes reaches the whole model's %d", rank, m.peakParams, 4*psi)
					}
				}
			})
		}
	}
}
