package blas

import (
	"sync/atomic"
	"testing"
	"time"
)

// fakeGemm takes a fixed time per FLOP on each shape (sleeping, so the
// machine's load cannot reorder two fakes) and counts its calls.
type fakeGemm struct {
	name  string
	gflop map[Shape]float64 // GFLOP/s on each shape; missing: rate
	rate  float64
	calls atomic.Int64
}

func (f *fakeGemm) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	f.calls.Add(1)
	s := Shape{TransA: transA, TransB: transB, M: m, N: n, K: k}
	r := f.rate
	if g, ok := f.gflop[s]; ok {
		r = g
	}
	time.Sleep(time.Duration(s.Flops() / (r * 1e9) * float64(time.Second)))
}

func (f *fakeGemm) Info() Info { return Info{Name: f.name} }

var (
	chooseA = Shape{M: 512, N: 256, K: 128} // 34 MFLOP: sleeps of 10-30 ms, long enough to be timed
	chooseB = Shape{TransB: true, M: 256, N: 512, K: 128}
)

func chooseOpts(t *testing.T) ChooseOptions {
	return ChooseOptions{Shapes: []Shape{chooseA, chooseB}, CacheDir: t.TempDir(), Budget: 600 * time.Millisecond, CPU: "test cpu",
		Square: Shape{M: 256, N: 256, K: 256}}
}

// The faster GEMM over the run's shapes wins, whichever it is: the Go
// GEMM on a machine where OpenBLAS runs slow kernels (an environment
// forcing Haswell on AVX-512), OpenBLAS where it is the faster.
func TestChooseTakesTheFaster(t *testing.T) {
	for _, tc := range []struct {
		goRate, obRate float64
		want           string
	}{
		{goRate: 3.0, obRate: 1.8, want: ChoiceGo},
		{goRate: 1.0, obRate: 1.5, want: ChoiceOpenBLAS},
	} {
		g := &fakeGemm{name: ChoiceGo, rate: tc.goRate}
		o := &fakeGemm{name: ChoiceOpenBLAS, rate: tc.obRate}
		impl, c := ChooseAmong([]Candidate{{Name: ChoiceGo, Impl: g, Key: "go"}, {Name: ChoiceOpenBLAS, Impl: o, Key: "ob Haswell"}}, chooseOpts(t))
		if c.Name != tc.want || impl.Info().Name != tc.want {
			t.Errorf("go %.1f, openblas %.1f GFLOP/s: chose %s (%v), want %s", tc.goRate, tc.obRate, c.Name, c.GFLOPS, tc.want)
		}
		if c.Cached || g.calls.Load() == 0 || o.calls.Load() == 0 {
			t.Errorf("first choice not measured: cached %v, calls %d/%d", c.Cached, g.calls.Load(), o.calls.Load())
		}
		// Sleeps overshoot a little; the ratio is what decides.
		ratio := c.GFLOPS[ChoiceGo] / c.GFLOPS[ChoiceOpenBLAS]
		if want := tc.goRate / tc.obRate; ratio < want*0.8 || ratio > want*1.2 {
			t.Errorf("measured ratio %.2f, want about %.2f", ratio, want)
		}
		if c.Roofline < 0.8*max(tc.goRate, tc.obRate) || c.Roofline > 1.2*max(tc.goRate, tc.obRate) {
			t.Errorf("roofline %.2f GFLOP/s, want about the faster rate %.2f", c.Roofline, max(tc.goRate, tc.obRate))
		}
	}
}

// Total time over the shapes decides, not the best single shape: a GEMM
// fast on the small shape and slow on the large one loses.
func TestChooseWeighsShapesByTime(t *testing.T) {
	big := Shape{M: 1024, N: 512, K: 128} // 4x chooseA's FLOPs
	g := &fakeGemm{name: ChoiceGo, rate: 1, gflop: map[Shape]float64{chooseA: 4}}
	o := &fakeGemm{name: ChoiceOpenBLAS, rate: 1.5}
	opts := chooseOpts(t)
	opts.Shapes = []Shape{chooseA, big}
	_, c := ChooseAmong([]Candidate{{Name: ChoiceGo, Impl: g}, {Name: ChoiceOpenBLAS, Impl: o}}, opts)
	if c.Name != ChoiceOpenBLAS {
		t.Errorf("chose %s (%v): the Go fake spends more time on the larger shape", c.Name, c.GFLOPS)
	}
	if c.Roofline < 3 {
		t.Errorf("roofline %.2f, want the Go fake's 4 GFLOP/s on the small shape", c.Roofline)
	}
}

// A second start on the same machine reads the cache and times nothing;
// another library or core type (part of the key) measures again, and the
// roofline kept is the highest measured.
func TestChooseCache(t *testing.T) {
	opts := chooseOpts(t)
	g := &fakeGemm{name: ChoiceGo, rate: 2}
	o := &fakeGemm{name: ChoiceOpenBLAS, rate: 1}
	cands := []Candidate{{Name: ChoiceGo, Impl: g, Key: "go"}, {Name: ChoiceOpenBLAS, Impl: o, Key: "ob SkylakeX"}}
	_, first := ChooseAmong(cands, opts)
	calls := g.calls.Load() + o.calls.Load()
	_, second := ChooseAmong(cands, opts)
	if !second.Cached || second.Name != first.Name || g.calls.Load()+o.calls.Load() != calls {
		t.Errorf("second choice: cached %v, %s vs %s, %d more calls", second.Cached, second.Name, first.Name, g.calls.Load()+o.calls.Load()-calls)
	}
	if second.Why() == "" || first.Why() == second.Why() {
		t.Errorf("why: %q then %q", first.Why(), second.Why())
	}

	// Another core type (part of the key) is measured again, here under
	// load; the roofline stays the machine's best measured so far.
	slowG, slowO := &fakeGemm{name: ChoiceGo, rate: 0.5}, &fakeGemm{name: ChoiceOpenBLAS, rate: 0.25}
	cands[0].Impl, cands[1].Impl = slowG, slowO
	cands[1].Key = "ob Haswell"
	_, third := ChooseAmong(cands, opts)
	if third.Cached || slowG.calls.Load() == 0 {
		t.Error("a new core type did not measure again")
	}
	if third.Roofline != first.Roofline {
		t.Errorf("roofline %.2f after a slower measurement, want the machine's best %.2f", third.Roofline, first.Roofline)
	}
	// A better rate measured later raises it for every later start.
	if got := RecordRoofline(opts, first.Roofline*2); got != first.Roofline*2 {
		t.Errorf("RecordRoofline = %.2f, want %.2f", got, first.Roofline*2)
	}
	if _, c := ChooseAmong(cands, opts); !c.Cached || c.Roofline != first.Roofline*2 {
		t.Errorf("after a better rate: roofline %.2f (cached %v), want %.2f", c.Roofline, c.Cached, first.Roofline*2)
	}
	other := opts
	other.CPU = "another cpu"
	if _, c := ChooseAmong(cands, other); c.Roofline > 0.75 {
		t.Errorf("another machine's roofline %.2f comes from this one's cache", c.Roofline)
	}
}

// One candidate: no timing at all is needed to pick it, but it is timed
// for the roofline.
func TestChooseSingle(t *testing.T) {
	g := &fakeGemm{name: ChoiceGo, rate: 2}
	impl, c := ChooseAmong([]Candidate{{Name: ChoiceGo, Impl: g}}, chooseOpts(t))
	if impl != g || c.Name != ChoiceGo || c.Why() != "the only GEMM available" || c.Roofline <= 0 {
		t.Errorf("single candidate: %+v", c)
	}
}

// Ranks starting together measure once: the first takes the lock and
// measures, the others wait and read its answer.
func TestChooseOnceAcrossConcurrentStarts(t *testing.T) {
	opts := chooseOpts(t)
	g := &fakeGemm{name: ChoiceGo, rate: 2}
	o := &fakeGemm{name: ChoiceOpenBLAS, rate: 1}
	cands := []Candidate{{Name: ChoiceGo, Impl: g}, {Name: ChoiceOpenBLAS, Impl: o}}
	done := make(chan Choice, 4)
	for range 4 {
		go func() {
			_, c := ChooseAmong(cands, opts)
			done <- c
		}()
	}
	measured := 0
	for range 4 {
		if c := <-done; !c.Cached {
			measured++
		}
	}
	if measured != 1 {
		t.Errorf("%d of 4 concurrent starts measured, want 1", measured)
	}
}
