package zero_test

import (
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
	"github.com/gotrain/gotrain/comm/tcp"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/optim"
	"github.com/gotrain/gotrain/zero"
)

var _ model.ParamStore = (*zero.Engine)(nil)

// rankEnv is one in-process rank of a commtest world: its own CPU backend
// (wrapped to track per-category peaks) and TCP Comm over loopback,
// exactly as separate processes connect.
type rankEnv struct {
	be *trackedBackend
	c  comm.Comm
}

// newWorld starts size ranks and closes them when the test ends.
func newWorld(tb testing.TB, size int) []*rankEnv {
	tb.Helper()
	ranks := commtest.NewWorld(tb, size, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
		be := newTracked(cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1}))
		c, err := tcp.New(ctx, st, be, tcp.Options{Rank: r, Size: size, Timeout: 20 * time.Second})
		return c, be, err
	})
	envs := make([]*rankEnv, size)
	for r, rk := range ranks {
		envs[r] = &rankEnv{be: rk.Backend.(*trackedBackend), c: rk.Comm}
	}
	return envs
}

func onEveryRank(size int, f func(r int) error) []error { return commtest.OnEveryRank(size, f) }

func firstErr(errs []error) error { return commtest.FirstErr(errs) }

// trackedBackend records the current and peak bytes of every (pool,
// category), which backend.MemoryStats keeps per pool only. It passes the
// Llama family's ops through, so those models run on it too.
type trackedBackend struct {
	backend.Backend
	backend.DecoderOps
	mu      sync.Mutex
	current map[[2]int]int64
	peak    map[[2]int]int64
}

func newTracked(be backend.Backend) *trackedBackend {
	dec, _ := be.(backend.DecoderOps)
	return &trackedBackend{Backend: be, DecoderOps: dec, current: map[[2]int]int64{}, peak: map[[2]int]int64{}}
}

func (t *trackedBackend) Alloc(pool backend.Pool, cat backend.Category, dt backend.DType, n int) (backend.Buffer, error) {
	b, err := t.Backend.Alloc(pool, cat, dt, n)
	if err == nil {
		t.mu.Lock()
		k := [2]int{int(pool), int(cat)}
		t.current[k] += int64(b.Bytes())
		t.peak[k] = max(t.peak[k], t.current[k])
		t.mu.Unlock()
	}
	return b, err
}

func (t *trackedBackend) Free(b backend.Buffer) {
	t.mu.Lock()
	t.current[[2]int{int(b.Pool()), int(b.Category())}] -= int64(b.Bytes())
	t.mu.Unlock()
	t.Backend.Free(b)
}

// peakOf is the peak of one device category since the last resetPeaks.
func (t *trackedBackend) peakOf(cat backend.Category) int64 {
	return t.peakIn(backend.Device, cat)
}

// peakIn is the peak of one category of pool since the last resetPeaks.
func (t *trackedBackend) peakIn(pool backend.Pool, cat backend.Category) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peak[[2]int{int(pool), int(cat)}]
}

func (t *trackedBackend) resetPeaks() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.current {
		t.peak[k] = v
	}
}

// refStore serves a model from whole parameter and gradient buffers, with
// no engine: the reference's own storage, so its updates are the test's.
type refStore struct {
	lay           *model.Layout
	params, grads backend.Buffer
}

func (s *refStore) Acquire(g int, backward bool) (backend.Buffer, backend.Buffer, error) {
	off, n := s.lay.GroupRange(g)
	if !backward {
		return s.params.Slice(off, n), backend.Buffer{}, nil
	}
	return s.params.Slice(off, n), s.grads.Slice(off, n), nil
}

func (s *refStore) Release(int, bool) error { return nil }

// run is one training setup shared by the reference and the ranks.
type run struct {
	cfg        model.Config
	B, T, gas  int
	steps      int
	seed       uint64
	adam       optim.AdamWConfig
	clip       float64
	world      int     // ranks the global batch is split over
	globalRows int     // world·B sequences per micro-batch
	lossScale  float64 // ranks scale dloss by it and pass it to Step (0: none)
}

func testRun(cfg model.Config, world, steps int) run {
	adam := optim.AdamWConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1, AdamWMode: true}
	return run{cfg: cfg, B: 2, T: 8, gas: 2, steps: steps, seed: 7, adam: adam, clip: 1.0, world: world, globalRows: world * 2}
}

// batch returns micro-batch (step, micro)'s global rows: inputs and
// targets, row-major (world·B, T). The token stream is mostly a fixed
// successor map with some noise, so the loss falls quickly and differences
// in the parameters show in it.
func (r run) batch(step, micro int) (inputs, targets []int32) {
	rng := rand.New(rand.NewPCG(uint64(step)*131+uint64(micro), 17))
	V := r.cfg.V
	inputs = make([]int32, r.globalRows*r.T)
	targets = make([]int32, r.globalRows*r.T)
	for row := range r.globalRows {
		tok := rng.IntN(V)
		for t := 0; t <= r.T; t++ {
			if t < r.T {
				inputs[row*r.T+t] = int32(tok)
			}
			if t > 0 {
				targets[row*r.T+t-1] = int32(tok)
			}
			if rng.IntN(10) == 0 {
				tok = rng.IntN(V)
			} else {
				tok = (tok*5 + 3) % V
			}
		}
	}
	return inputs, targets
}

// rows cuts rank's B sequences out of a global micro-batch.
func (r run) rows(x []int32, rank int) []int32 {
	return x[rank*r.B*r.T : (rank+1)*r.B*r.T]
}

// stepResult is what one optimizer step reports.
type stepResult struct {
	loss, norm float64
}

// reference trains the single-process model over the same global batches:
// one Forward of world·B sequences per micro-step, gradient of the mean
// over every token of the step, clipping by the float64 global norm, and
// backend AdamW per tensor with its decay flag.
func reference(tb testing.TB, r run) ([]stepResult, []float32) {
	tb.Helper()
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	lay := model.NewLayout(r.cfg)
	n := lay.NumParams()
	params, _ := be.Alloc(backend.Device, backend.Params, backend.F32, n)
	grads, _ := be.Alloc(backend.Device, backend.Grads, backend.F32, n)
	mom, _ := be.Alloc(backend.Device, backend.Optimizer, backend.F32, n)
	vel, _ := be.Alloc(backend.Device, backend.Optimizer, backend.F32, n)
	for _, b := range []backend.Buffer{params, grads, mom, vel} {
		defer be.Free(b)
	}
	if err := backend.WriteF32(be, params, model.InitParams(r.cfg, r.seed)); err != nil {
		tb.Fatal(err)
	}
	m, err := model.New(be, r.cfg, model.Options{Store: &refStore{lay: lay, params: params, grads: grads}})
	if err != nil {
		tb.Fatal(err)
	}
	defer m.Free()
	var out []stepResult
	rowsB := r.globalRows
	for step := 1; step <= r.steps; step++ {
		be.Zero(grads)
		var lossSum float64
		for micro := range r.gas {
			in, tg := r.batch(step, micro)
			loss, err := m.Forward(in, tg, rowsB, r.T)
			if err != nil {
				tb.Fatal(err)
			}
			if err := m.Backward(float32(1 / float64(rowsB*r.T*r.gas))); err != nil {
				tb.Fatal(err)
			}
			lossSum += float64(loss)
		}
		g, err := backend.ReadF32(be, grads)
		if err != nil {
			tb.Fatal(err)
		}
		var sq float64
		for _, x := range g {
			sq += float64(x) * float64(x)
		}
		norm := math.Sqrt(sq)
		coef := math.Min(1, r.clip/(norm+1e-6))
		for _, t := range lay.Tensors() {
			hp := r.adam.Params(step)
			hp.GradScale = float32(coef)
			if !t.Decay {
				hp.WeightDecay = 0
			}
			be.AdamW(params.Slice(t.Offset, t.Len), backend.Buffer{}, grads.Slice(t.Offset, t.Len),
				mom.Slice(t.Offset, t.Len), vel.Slice(t.Offset, t.Len), hp)
		}
		out = append(out, stepResult{loss: lossSum / float64(r.gas), norm: norm})
	}
	p, err := backend.ReadF32(be, params)
	if err != nil {
		tb.Fatal(err)
	}
	return out, p
}

// rankState is one rank's model and engine.
type rankState struct {
	env *rankEnv
	m   *model.Model
	eng *zero.Engine
	lay *model.Layout
}

// newRank builds rank r's engine and model and initializes the weights
// group by group.
func newRank(ctx context.Context, env *rankEnv, r run, o zero.Options) (*rankState, error) {
	lay := model.NewLayout(r.cfg)
	eng, err := zero.New(ctx, env.be, env.c, zero.LayoutOf(lay), o)
	if err != nil {
		return nil, err
	}
	if err := eng.InitParams(func(g int) ([]float32, error) { return model.InitGroup(lay, r.seed, g), nil }); err != nil {
		eng.Close()
		return nil, err
	}
	m, err := model.New(env.be, r.cfg, model.Options{Store: eng, ActDType: backend.F32})
	if err != nil {
		eng.Close()
		return nil, err
	}
	return &rankState{env: env, m: m, eng: eng, lay: lay}, nil
}

func (s *rankState) close() {
	s.m.Free()
	s.eng.Close()
}

// step runs one optimizer step on this rank: gas micro-batches of its B
// rows, the global mean loss averaged over ranks through the engine, and
// Step.
func (s *rankState) step(ctx context.Context, r run, step, rank int) (stepResult, error) {
	if err := s.eng.ZeroGrad(); err != nil {
		return stepResult{}, err
	}
	var lossSum float64
	for micro := range r.gas {
		in, tg := r.batch(step, micro)
		loss, err := s.m.Forward(r.rows(in, rank), r.rows(tg, rank), r.B, r.T)
		if err != nil {
			return stepResult{}, err
		}
		if err := s.m.Backward(float32(1/float64(r.B*r.T*r.gas*r.world)) * float32(cmp.Or(r.lossScale, 1))); err != nil {
			return stepResult{}, err
		}
		lossSum += float64(loss)
	}
	loss, err := s.globalMean(ctx, lossSum/float64(r.gas))
	if err != nil {
		return stepResult{}, err
	}
	norm, err := s.eng.Step(ctx, zero.StepInput{AdamW: r.adam.Params(step), ClipNorm: r.clip, LossScale: r.lossScale})
	if err != nil {
		return stepResult{}, err
	}
	return stepResult{loss: loss, norm: norm}, nil
}

// globalMean averages x over the ranks with the Comm, in order with the
// engine's collectives.
func (s *rankState) globalMean(ctx context.Context, x float64) (float64, error) {
	be := s.env.be
	buf, err := be.Alloc(backend.Device, backend.Workspace, backend.F32, 1)
	if err != nil {
		return 0, err
	}
	defer be.Free(buf)
	if err := backend.WriteF32(be, buf, []float32{float32(x)}); err != nil {
		return 0, err
	}
	if err := s.eng.Collective(ctx, "average the loss", func(ctx context.Context, c comm.Comm) error {
		return c.AllReduce(ctx, buf, comm.Avg)
	}); err != nil {
		return 0, err
	}
	v, err := backend.ReadF32(be, buf)
	if err != nil {
		return 0, err
	}
	return float64(v[0]), nil
}

func relDiff(a, b float64) float64 {
	return math.Abs(a-b) / math.Max(math.Abs(b), 1e-30)
}
