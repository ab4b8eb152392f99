package zero_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// flatStore is an in-memory checkpoint: each kind is one float32 per
// element of the flat layout. It counts how often every element is written
// and by which ranks, and the largest single write.
type flatStore struct {
	mu      sync.Mutex
	vals    map[string][]float32
	count   map[string][]int
	writers map[int]bool
	largest int
}

func newFlatStore(n int) *flatStore {
	s := &flatStore{vals: map[string][]float32{}, count: map[string][]int{}, writers: map[int]bool{}}
	for _, k := range []string{zero.StateParams, zero.StateExpAvg, zero.StateExpAvgSq} {
		s.vals[k] = make([]float32, n)
		s.count[k] = make([]int, n)
	}
	return s
}

func (s *flatStore) writer(rank int) func(kind string, off int, vals []float32) error {
	return func(kind string, off int, vals []float32) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		dst, ok := s.vals[kind]
		if !ok || off < 0 || off+len(vals) > len(dst) {
			return fmt.Errorf("write %q [%d, %d) outside the layout", kind, off, off+len(vals))
		}
		copy(dst[off:], vals)
		for i := range vals {
			s.count[kind][off+i]++
		}
		s.writers[rank] = true
		s.largest = max(s.largest, len(vals))
		return nil
	}
}

func (s *flatStore) read(kind string, off, n int) ([]float32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	src, ok := s.vals[kind]
	if !ok || off < 0 || off+n > len(src) {
		return nil, fmt.Errorf("read %q [%d, %d) outside the layout", kind, off, off+n)
	}
	return append([]float32(nil), src[off:off+n]...), nil
}

// exported is one run's checkpoint at step k and what followed it.
type exported struct {
	store  *flatStore
	params []float32    // HostParams at step k (rank 0)
	after  []stepResult // steps k+1..k+j, uninterrupted (rank 0)
}

// trainAndExport trains steps 1..k+j on every rank of envs, exporting the
// state into a store after step k.
func trainAndExport(t *testing.T, envs []*rankEnv, r run, o zero.Options, k, j int) exported {
	t.Helper()
	lay := model.NewLayout(r.cfg)
	out := exported{store: newFlatStore(lay.NumParams())}
	errs := onEveryRank(len(envs), func(rank int) error {
		ctx := context.Background()
		s, err := newRank(ctx, envs[rank], r, o)
		if err != nil {
			return err
		}
		defer s.close()
		for step := 1; step <= k+j; step++ {
			res, err := s.step(ctx, r, step, rank)
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			if step > k && rank == 0 {
				out.after = append(out.after, res)
			}
			if step != k {
				continue
			}
			if err := s.eng.ExportState(out.store.writer(rank)); err != nil {
				return err
			}
			p, err := s.eng.HostParams(ctx)
			if err != nil {
				return err
			}
			if rank == 0 {
				out.params = p
			}
		}
		return nil
	})
	if err := firstErr(errs); err != nil {
		t.Fatal(err)
	}
	return out
}

// restoreAndTrain builds fresh engines on envs from the store (no
// InitParams), checks that every rank's parameters are the stored master
// rounded to the parameter type, and trains steps k+1..k+j.
func restoreAndTrain(t *testing.T, envs []*rankEnv, r run, o zero.Options, store *flatStore, k, j int) []stepResult {
	t.Helper()
	lay := model.NewLayout(r.cfg)
	var results []stepResult
	errs := onEveryRank(len(envs), func(rank int) error {
		ctx := context.Background()
		env := envs[rank]
		eng, err := zero.New(ctx, env.be, env.c, zero.LayoutOf(lay), o)
		if err != nil {
			return err
		}
		defer eng.Close()
		if err := eng.RestoreState(store.read); err != nil {
			return err
		}
		params, err := eng.HostParams(ctx)
		if err != nil {
			return err
		}
		for i, p := range params {
			if want := roundTo(o.ParamDType, store.vals[zero.StateParams][i]); p != want {
				return fmt.Errorf("restored parameter %d is %v, the stored master rounded is %v", i, p, want)
			}
		}
		m, err := model.New(env.be, r.cfg, model.Options{Store: eng, ActDType: backend.F32})
		if err != nil {
			return err
		}
		defer m.Free()
		s := &rankState{env: env, m: m, eng: eng, lay: lay}
		for step := k + 1; step <= k+j; step++ {
			res, err := s.step(ctx, r, step, rank)
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			if rank == 0 {
				results = append(results, res)
			}
		}
		return nil
	})
	if err := firstErr(errs); err != nil {
		t.Fatal(err)
	}
	return results
}

func roundTo(dt backend.DType, x float32) float32 {
	switch dt {
	case backend.BF16:
		return backend.F32FromBF16(backend.BF16FromF32(x))
	case backend.F16:
		return backend.F32FromF16(backend.F16FromF32(x))
	}
	return x
}

// checkExport asserts that the ranks' writes tile every kind exactly once,
// that stage 0 is written by rank 0 alone and stages ≥ 1 never write more
// than one group chunk at a time, and that the stored master, rounded, is
// the model's parameters.
func checkExport(t *testing.T, ex exported, lay *model.Layout, o zero.Options, world int) {
	t.Helper()
	for kind, counts := range ex.store.count {
		for i, c := range counts {
			if c != 1 {
				t.Fatalf("%s element %d written %d times", kind, i, c)
			}
		}
	}
	if o.Stage == 0 && (len(ex.store.writers) != 1 || !ex.store.writers[0]) {
		t.Errorf("stage 0 written by ranks %v, want rank 0 alone", ex.store.writers)
	}
	if o.Stage >= 1 {
		maxChunk := 0
		for g := range lay.NumGroups() {
			_, n := lay.GroupRange(g)
			maxChunk = max(maxChunk, (n+world-1)/world)
		}
		if ex.store.largest > maxChunk {
			t.Errorf("a write of %d elements; a rank's largest chunk is %d", ex.store.largest, maxChunk)
		}
		if len(ex.store.writers) != world {
			t.Errorf("ranks %v wrote, want all %d", ex.store.writers, world)
		}
	}
	for i, p := range ex.params {
		if want := roundTo(o.ParamDType, ex.store.vals[zero.StateParams][i]); p != want {
			t.Fatalf("parameter %d is %v, the exported master rounded is %v", i, p, want)
		}
	}
	for _, kind := range []string{zero.StateExpAvg, zero.StateExpAvgSq} {
		nonzero := 0
		for _, x := range ex.store.vals[kind] {
			if x != 0 {
				nonzero++
			}
		}
		if nonzero < len(ex.params)/2 {
			t.Errorf("%s: only %d of %d elements nonzero after training", kind, nonzero, len(ex.params))
		}
	}
}

// A checkpoint taken after k steps and restored into fresh engines of the
// same world size and stage continues exactly: the next steps' losses and
// gradient norms equal the uninterrupted run's bit for bit.
func TestRestoreSameWorldIsExact(t *testing.T) {
	cfg := smallGPT2()
	const world, k, j = 2, 3, 3
	lay := model.NewLayout(cfg)
	envs := newWorld(t, world)
	r := testRun(cfg, world, k+j)
	type variant struct {
		name string
		o    zero.Options
	}
	var variants []variant
	for stage := range 4 {
		variants = append(variants, variant{fmt.Sprintf("stage%d", stage), stageOptions(cfg, world, stage, stage >= 2)})
	}
	off := stageOptions(cfg, world, 2, true)
	off.OffloadOptimizer = true
	variants = append(variants, variant{"stage2/offload", off})
	bf := stageOptions(cfg, world, 1, false)
	bf.ParamDType = backend.BF16
	variants = append(variants, variant{"stage1/bf16", bf})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			ex := trainAndExport(t, envs, r, v.o, k, j)
			checkExport(t, ex, lay, v.o, world)
			got := restoreAndTrain(t, envs, r, v.o, ex.store, k, j)
			for i, g := range got {
				w := ex.after[i]
				if g != w || math.IsNaN(g.loss) {
					t.Errorf("step %d: restored loss %v norm %v, uninterrupted loss %v norm %v", k+1+i, g.loss, g.norm, w.loss, w.norm)
				}
			}
		})
	}
}

// A stage-3 checkpoint of two ranks restores into one rank at stage 0 and
// into four ranks at stage 2, the global batch unchanged: the next steps'
// losses match the uninterrupted run within 1e-5 relative (the reductions
// sum in another order).
func TestRestoreReshards(t *testing.T) {
	cfg := smallGPT2()
	const world, k, j = 2, 3, 3
	lay := model.NewLayout(cfg)
	r := testRun(cfg, world, k+j)
	o := stageOptions(cfg, world, 3, true)
	ex := trainAndExport(t, newWorld(t, world), r, o, k, j)
	checkExport(t, ex, lay, o, world)
	for _, to := range []struct{ stage, world int }{{0, 1}, {2, 4}} {
		t.Run(fmt.Sprintf("stage%d/world%d", to.stage, to.world), func(t *testing.T) {
			r2 := r
			r2.world, r2.B = to.world, r.globalRows/to.world
			got := restoreAndTrain(t, newWorld(t, to.world), r2, stageOptions(cfg, to.world, to.stage, to.stage >= 2), ex.store, k, j)
			for i, g := range got {
				w := ex.after[i]
				if d := relDiff(g.loss, w.loss); !(d <= 1e-5) {
					t.Errorf("step %d: restored loss %v, uninterrupted %v (relative difference %.2g)", k+1+i, g.loss, w.loss, d)
				}
			}
		})
	}
}
