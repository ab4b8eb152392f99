package zero_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

// offloadCase is one offload configuration under test.
type offloadCase struct {
	stage        int
	overlap      bool
	oo, ooPinned bool // offload_optimizer {device: cpu, pin_memory}
	op, opPinned bool // offload_param {device: cpu, pin_memory}
	params       backend.DType
}

func (c offloadCase) String() string {
	s := fmt.Sprintf("stage%d", c.stage)
	if c.overlap {
		s += "/overlap"
	}
	if c.oo {
		s += "/offload_optimizer"
		if c.ooPinned {
			s += "(pinned)"
		}
	}
	if c.op {
		s += "/offload_param"
		if c.opPinned {
			s += "(pinned)"
		}
	}
	if c.params != 0 {
		s += "/" + c.params.String()
	}
	return s
}

func (c offloadCase) options(cfg model.Config, world int) zero.Options {
	o := stageOptions(cfg, world, c.stage, c.overlap)
	o.ParamDType = c.params
	o.OffloadOptimizer, o.OffloadOptimizerPinned = c.oo, c.ooPinned
	o.OffloadParam, o.OffloadParamPinned = c.op, c.opPinned
	return o
}

func (c offloadCase) optPool() backend.Pool {
	switch {
	case !c.oo:
		return backend.Device
	case c.ooPinned:
		return backend.HostPinned
	}
	return backend.Host
}

func (c offloadCase) paramPool() backend.Pool {
	switch {
	case !c.op:
		return backend.Device
	case c.opPinned:
		return backend.HostPinned
	}
	return backend.Host
}

// Offloading needs the stage that partitions what it offloads; the errors
// name the DeepSpeed key and the fix.
func TestOffloadOptionsNeedTheirStage(t *testing.T) {
	lay := model.NewLayout(smallGPT2())
	for _, tc := range []struct {
		stage    int
		oo, op   bool
		wantKeys []string
	}{
		{0, true, false, []string{"offload_optimizer", "stage is 0", "zero_optimization.stage"}},
		{1, false, true, []string{"offload_param", "stage is 1", "zero_optimization.stage to 3"}},
		{2, true, true, []string{"offload_param", "stage is 2", "zero_optimization.stage to 3"}},
	} {
		o := zero.DefaultOptions(tc.stage)
		o.OffloadOptimizer, o.OffloadParam = tc.oo, tc.op
		// The options are checked before anything touches the backend or
		// the Comm, so neither is needed.
		_, err := zero.New(context.Background(), nil, nil, zero.LayoutOf(lay), o)
		if err == nil {
			t.Errorf("stage %d, offload optimizer %v, param %v: New succeeded", tc.stage, tc.oo, tc.op)
			continue
		}
		for _, k := range tc.wantKeys {
			if !strings.Contains(err.Error(), k) {
				t.Errorf("stage %d: error %q does not mention %q", tc.stage, err, k)
			}
		}
	}
}

// The offload acceptance, per rank, from the backend's own
// accounting by pool: with offload_optimizer the device holds no master
// weights and no optimizer state at any point (N = 1, 2, 4; stages 1–3),
// the chosen host pool holds exactly the 12 bytes per partition element
// plus the one-chunk transfer buffers; with offload_param the device's
// parameter bytes are the persistent groups plus the gathered windows and
// nothing more, the partition being in the host pool.
func TestOffloadMemory(t *testing.T) {
	cfg := deepGPT2()
	lay := model.NewLayout(cfg)
	cases := []offloadCase{
		{stage: 1, oo: true},
		{stage: 2, oo: true, ooPinned: true, overlap: true},
		{stage: 3, oo: true, overlap: true},
		{stage: 3, op: true, opPinned: true, overlap: true},
		{stage: 3, oo: true, ooPinned: true, op: true, overlap: true},
		{stage: 3, oo: true, op: true, opPinned: true},
	}
	for _, world := range []int{1, 2, 4} {
		envs := newWorld(t, world)
		var part, maxChunk int64
		for g := range lay.NumGroups() {
			_, n := lay.GroupRange(g)
			c := int64((n + world - 1) / world)
			part += c
			maxChunk = max(maxChunk, c)
		}
		_, nf := lay.GroupRange(lay.NumGroups() - 1)
		persistent := 4 * int64(padded(nf, world)) // the final LayerNorm, kept whole
		for _, c := range cases {
			t.Run(fmt.Sprintf("world%d/%v", world, c), func(t *testing.T) {
				r := testRun(cfg, world, 1)
				o := c.options(cfg, world)
				type measured struct {
					cur        backend.MemoryStats
					devPeak    map[backend.Category]int64
					peakParams int64
					peakLive   int
				}
				got := make([]measured, world)
				errs := onEveryRank(world, func(rank int) error {
					ctx := context.Background()
					be := envs[rank].be
					be.resetPeaks()
					s, err := newRank(ctx, envs[rank], r, o)
					if err != nil {
						return err
					}
					if _, err := s.step(ctx, r, 1, rank); err != nil {
						s.close()
						return err
					}
					m := measured{cur: be.Memory(), devPeak: map[backend.Category]int64{}, peakLive: s.eng.Stats().PeakLiveElements}
					for _, cat := range []backend.Category{backend.Master, backend.Optimizer, backend.Params} {
						m.devPeak[cat] = be.peakIn(backend.Device, cat)
					}
					got[rank] = m
					s.close()
					for _, p := range backend.Pools() {
						if left := be.Memory().PoolTotal(p); left != 0 {
							return fmt.Errorf("%d %s bytes left after Close", left, p)
						}
					}
					return nil
				})
				if err := firstErr(errs); err != nil {
					t.Fatal(err)
				}
				// What each host pool must hold: master and moments plus the
				// gradient chunk copied out (and the updated chunk, when the
				// parameters are on the device) where the optimizer lives;
				// the parameter partition where the parameters live.
				var wantHost backend.MemoryStats
				if c.oo {
					p := c.optPool()
					wantHost.Current[p][backend.Master] += 4 * part
					wantHost.Current[p][backend.Optimizer] += 8 * part
					wantHost.Current[p][backend.Comm] += 4 * maxChunk
					if !c.op {
						wantHost.Current[p][backend.Comm] += 4 * maxChunk
					}
				}
				if c.op {
					wantHost.Current[c.paramPool()][backend.Params] += 4 * part
				}
				for rank, m := range got {
					dev := m.cur.Current[backend.Device]
					devPeak := func(cat backend.Category) int64 { return m.devPeak[cat] }
					for _, p := range []backend.Pool{backend.HostPinned, backend.Host} {
						for _, cat := range backend.Categories() {
							if g, w := m.cur.Current[p][cat], wantHost.Current[p][cat]; g != w {
								t.Errorf("rank %d: %s %s %d bytes, want %d", rank, p, cat, g, w)
							}
						}
					}
					if c.oo {
						for _, cat := range []backend.Category{backend.Master, backend.Optimizer} {
							if dev[cat] != 0 || devPeak(cat) != 0 {
								t.Errorf("rank %d: device %s %d bytes (peak %d) with offload_optimizer, want 0", rank, cat, dev[cat], devPeak(cat))
							}
						}
					} else if st := dev[backend.Master] + dev[backend.Optimizer]; st != 12*part {
						t.Errorf("rank %d: device master+optimizer %d bytes without offload_optimizer, want %d", rank, st, 12*part)
					}
					wantGrads := 4 * part
					if c.stage == 1 {
						wantGrads += 4 * int64(world) * part
					}
					if dev[backend.Grads] != wantGrads {
						t.Errorf("rank %d: device gradients %d bytes, want %d", rank, dev[backend.Grads], wantGrads)
					}
					wantParams := 4 * int64(world) * part // stages 1–2: whole, padded
					if c.stage == 3 {
						wantParams = persistent
						if !c.op {
							wantParams += 4 * part
						}
					}
					if dev[backend.Params] != wantParams {
						t.Errorf("rank %d: device parameters %d bytes after the step, want %d", rank, dev[backend.Params], wantParams)
					}
					if c.stage != 3 {
						continue
					}
					// The gathered windows come on top, and nothing else.
					if want := wantParams + 4*int64(m.peakLive); devPeak(backend.Params) != want {
						t.Errorf("rank %d: device parameter peak %d bytes, want %d resident + %d gathered", rank, devPeak(backend.Params), wantParams, 4*m.peakLive)
					}
					if c.op && m.peakLive > int(o.MaxLiveParameters) {
						t.Errorf("rank %d: %d elements gathered at the peak, more than stage3_max_live_parameters %d", rank, m.peakLive, o.MaxLiveParameters)
					}
				}
				if world == 2 && c.oo && (c.stage == 2 || c.op) {
					m := got[0].cur
					t.Logf("rank 0 after a step, bytes: device %v; host_pinned %v; host %v (categories %v)",
						m.Current[backend.Device], m.Current[backend.HostPinned], m.Current[backend.Host], backend.Categories())
				}
			})
		}
	}
}

// offloadRun is what one configuration produced on every rank.
type offloadRun struct {
	results      [][]stepResult
	params       [][]float32
	master, m, v [][]float32
}

// trainOffloadCase trains c for r.steps steps on envs and collects each
// rank's losses, norms, final weights and optimizer state.
func trainOffloadCase(t *testing.T, envs []*rankEnv, r run, c offloadCase) offloadRun {
	t.Helper()
	world := len(envs)
	o := c.options(r.cfg, world)
	out := offloadRun{results: make([][]stepResult, world), params: make([][]float32, world),
		master: make([][]float32, world), m: make([][]float32, world), v: make([][]float32, world)}
	errs := onEveryRank(world, func(rank int) error {
		ctx := context.Background()
		s, err := newRank(ctx, envs[rank], r, o)
		if err != nil {
			return err
		}
		defer s.close()
		for step := 1; step <= r.steps; step++ {
			res, err := s.step(ctx, r, step, rank)
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			out.results[rank] = append(out.results[rank], res)
		}
		if out.params[rank], err = s.eng.HostParams(ctx); err != nil {
			return err
		}
		mb, vb := s.eng.Moments()
		for _, x := range []struct {
			dst *[]float32
			buf backend.Buffer
		}{{&out.master[rank], s.eng.Master()}, {&out.m[rank], mb}, {&out.v[rank], vb}} {
			if x.buf.IsNil() { // stage 0 with fp32 parameters has no master
				continue
			}
			if *x.dst, err = backend.ReadF32(envs[rank].be, x.buf); err != nil {
				return err
			}
		}
		return nil
	})
	if err := firstErr(errs); err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	return out
}

// Offloading moves where the same operations run, not what they compute:
// every step's loss and gradient norm, the final weights and the master
// and moments equal those of the same configuration without offload, bit
// for bit (world 1 and 2; stages 1–3 with offload_optimizer, stage 3 with
// offload_param and with both; one bf16 run, whose parameters are rounded
// on the host before being copied back).
func TestOffloadMatchesDevice(t *testing.T) {
	cfg := smallGPT2()
	const steps = 4
	cases := []offloadCase{
		{stage: 1, oo: true},
		{stage: 2, oo: true, overlap: true},
		{stage: 2, oo: true, ooPinned: true, params: backend.BF16},
		{stage: 3, oo: true, overlap: true},
		{stage: 3, op: true, overlap: true},
		{stage: 3, oo: true, op: true, opPinned: true},
		{stage: 3, oo: true, ooPinned: true, op: true, overlap: true},
	}
	for _, world := range []int{1, 2} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			envs := newWorld(t, world)
			r := testRun(cfg, world, steps)
			baselines := map[offloadCase]offloadRun{}
			for _, c := range cases {
				base := offloadCase{stage: c.stage, overlap: c.overlap, params: c.params}
				want, ok := baselines[base]
				if !ok {
					want = trainOffloadCase(t, envs, r, base)
					baselines[base] = want
				}
				got := trainOffloadCase(t, envs, r, c)
				for rank := range world {
					for i, g := range got.results[rank] {
						w := want.results[rank][i]
						if g != w || math.IsNaN(g.loss) {
							t.Errorf("%v rank %d step %d: loss %v norm %v, without offload loss %v norm %v", c, rank, i+1, g.loss, g.norm, w.loss, w.norm)
						}
					}
					for name, pair := range map[string][2][]float32{
						"weights": {got.params[rank], want.params[rank]},
						"master":  {got.master[rank], want.master[rank]},
						"m":       {got.m[rank], want.m[rank]},
						"v":       {got.v[rank], want.v[rank]},
					} {
						if !slices.Equal(pair[0], pair[1]) {
							t.Errorf("%v rank %d: the %s differ from the run without offload", c, rank, name)
						}
					}
				}
				if first, last := got.results[0][0].loss, got.results[0][steps-1].loss; last >= first {
					t.Errorf("%v: the loss did not fall (%v to %v)", c, first, last)
				}
			}
		})
	}
}
