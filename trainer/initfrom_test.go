package trainer_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
	"github.com/gotrain/gotrain/comm/tcp"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
	"github.com/gotrain/gotrain/zero"
)

// countingSource counts the elements read through it.
type countingSource struct {
	model.WeightSource
	read atomic.Int64
}

func (c *countingSource) ReadRange(dst []float32, off int) error {
	c.read.Add(int64(len(dst)))
	return c.WeightSource.ReadRange(dst, off)
}

// TestInitFromReadsOwnedRanges: at ZeRO-3 each of two ranks reads from
// the snapshot exactly the elements it owns (its chunk of every group,
// about half the model), never the whole model, and the engine then holds
// the snapshot's weights bit for bit; at ZeRO-2, where every rank holds all
// parameters, each reads the whole model once, group by group.
func TestInitFromReadsOwnedRanges(t *testing.T) {
	snap := filepath.Join("..", "model", "testdata", "llama_tiny", "llama_gqa")
	cfg, want, err := model.LoadSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	lay := model.NewLayout(cfg)
	for _, stage := range []int{3, 2} {
		const world = 2
		bes := make([]backend.Backend, world)
		for r := range bes {
			bes[r] = cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
		}
		ranks := commtest.NewWorld(t, world, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
			c, err := tcp.New(ctx, st, bes[r], tcp.Options{Rank: r, Size: size, Timeout: 20 * time.Second})
			return c, bes[r], err
		})
		reads := make([]int64, world)
		owned := make([]int64, world)
		errs := commtest.OnEveryRank(world, func(r int) error {
			o := zero.DefaultOptions(stage)
			o.PersistenceThreshold = 0
			eng, err := zero.New(context.Background(), bes[r], ranks[r].Comm, zero.LayoutOf(lay), o)
			if err != nil {
				return err
			}
			defer eng.Close()
			w, err := model.OpenSnapshot(snap)
			if err != nil {
				return err
			}
			defer w.Close()
			src := &countingSource{WeightSource: w}
			if err := trainer.InitParamsFrom(eng, src); err != nil {
				return err
			}
			reads[r] = src.read.Load()
			for g := range lay.NumGroups() {
				_, n := eng.Plan().Owned(g, r)
				owned[r] += int64(n)
			}
			got, err := eng.HostParams(context.Background())
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				t.Errorf("stage %d rank %d: the engine's parameters differ from the snapshot's", stage, r)
			}
			return nil
		})
		if err := commtest.FirstErr(errs); err != nil {
			t.Fatal(err)
		}
		n := int64(lay.NumParams())
		for r := range world {
			switch {
			case stage == 3 && (reads[r] != owned[r] || reads[r] > n/2+int64(lay.NumGroups())):
				t.Errorf("stage 3 rank %d read %d elements; it owns %d of %d", r, reads[r], owned[r], n)
			case stage == 2 && reads[r] != n:
				t.Errorf("stage 2 rank %d read %d elements, want the whole model's %d once", r, reads[r], n)
			}
		}
		t.Logf("stage %d: ranks read %v of %d elements", stage, reads, n)
	}
}
