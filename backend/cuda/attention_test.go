package cuda

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/attnplan"
	"github.com/gotrain/gotrain/backend/backendtest"
	"github.com/gotrain/gotrain/backend/compare"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// upload puts vals into a new device buffer of dt on be.
func upload(t *testing.T, be backend.Backend, dt backend.DType, vals []float32) backend.Buffer {
	t.Helper()
	x, err := be.Alloc(backend.Device, backend.Activations, dt, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.WriteF32(be, x, vals); err != nil {
		t.Fatal(err)
	}
	return x
}

func download(t *testing.T, be backend.Backend, x backend.Buffer) []float32 {
	t.Helper()
	v, err := backend.ReadF32(be, x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// agree requires |got − want| ≤ tol·(rms(want) + |want|) elementwise.
func agree(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	var ss float64
	for _, w := range want {
		ss += float64(w) * float64(w)
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	bad := 0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= tol*(rms+math.Abs(float64(want[i])))) {
			if bad < 5 {
				t.Errorf("%s[%d]: gpu %g, cpu %g", name, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", name, bad, len(want))
	}
}

func normals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// attRun is one attention problem run forward and backward on a backend
// with activations in dt and a workspace budget (CPU: ignored).
type attRun struct {
	B, T, NH, KV, HD int
	dt               backend.DType
	budget           int
}

func (a attRun) String() string {
	return fmt.Sprintf("B%dT%dNH%dKV%dHD%d/%s", a.B, a.T, a.NH, a.KV, a.HD, a.dt)
}

// attResult is one run's inputs as stored and its outputs, as fp32.
type attResult struct{ qkv, dout, out, lse, dqkv []float32 }

// forward draws qkv and dout from seed, stores them in a.dt and runs the
// forward pass.
func (a attRun) forward(t *testing.T, be backend.Backend, seed uint64) attResult {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, uint64(a.T)))
	nqkv, nout := a.B*a.T*(a.NH+2*a.KV)*a.HD, a.B*a.T*a.NH*a.HD
	qkv, dout := upload(t, be, a.dt, normals(r, nqkv)), upload(t, be, a.dt, normals(r, nout))
	o := upload(t, be, a.dt, make([]float32, nout))
	l := upload(t, be, backend.F32, make([]float32, a.B*a.NH*a.T))
	if g, ok := be.(*Backend); ok {
		g.attentionForward(o, l, qkv, a.B, a.T, a.NH, a.KV, a.HD, a.budget)
	} else {
		be.AttentionForward(o, l, qkv, a.B, a.T, a.NH, a.KV, a.HD)
	}
	return attResult{qkv: download(t, be, qkv), dout: download(t, be, dout), out: download(t, be, o), lse: download(t, be, l)}
}

// backward runs the backward pass on in's qkv, dout, out and lse (so two
// backends' gradients are compared on the same inputs, whatever their
// forward outputs' last bits) and returns dqkv.
func (a attRun) backward(t *testing.T, be backend.Backend, in attResult) []float32 {
	t.Helper()
	qkv, dout, o := upload(t, be, a.dt, in.qkv), upload(t, be, a.dt, in.dout), upload(t, be, a.dt, in.out)
	l := upload(t, be, backend.F32, in.lse)
	d := upload(t, be, a.dt, make([]float32, len(in.qkv)))
	if g, ok := be.(*Backend); ok {
		g.attentionBackward(d, dout, o, qkv, l, a.B, a.T, a.NH, a.KV, a.HD, a.budget)
	} else {
		be.AttentionBackward(d, dout, o, qkv, l, a.B, a.T, a.NH, a.KV, a.HD)
	}
	if err := be.Sync(); err != nil {
		t.Fatal(err)
	}
	return download(t, be, d)
}

// compareWithCPU runs a on this backend g and on the CPU backend: the
// forward passes from the same inputs, the backward passes from the same
// inputs and the CPU's out and lse.
func (a attRun) compareWithCPU(t *testing.T, g *Backend, seed uint64) {
	t.Helper()
	gr, cr := a.forward(t, g, seed), a.forward(t, newHost(), seed)
	gr.dqkv, cr.dqkv = a.backward(t, g, cr), a.backward(t, newHost(), cr)
	a.agreeAttention(t, gr, cr)
}

// agreeAttention compares this backend's run g with the CPU backend's c
// on the same inputs. fp32: the comparison suite's tolerance. 16-bit: this
// backend rounds the probabilities and dS to bf16 for its tensor-core
// GEMMs (backend.go), so each element may differ by 2^-8 (two half ulps)
// of the magnitudes of the terms those roundings perturb
// (backendtest.RefAttentionRoundingBound) and of itself, on top of the
// fp32 tolerance.
func (a attRun) agreeAttention(t *testing.T, g, c attResult) {
	t.Helper()
	agree(t, "lse", g.lse, c.lse, compare.Tol(backend.F32))
	if a.dt == backend.F32 {
		agree(t, "out", g.out, c.out, compare.Tol(backend.F32))
		agree(t, "dqkv", g.dqkv, c.dqkv, compare.Tol(backend.F32))
		return
	}
	f64 := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	bOut, bD := make([]float64, len(c.out)), make([]float64, len(c.dqkv))
	backendtest.RefAttentionRoundingBound(bOut, bD, f64(c.qkv), f64(c.dout), f64(c.out), a.B, a.T, a.NH, a.KV, a.HD)
	within := func(name string, got, want []float32, bound []float64) {
		var ss float64
		for _, w := range want {
			ss += float64(w) * float64(w)
		}
		rms := math.Sqrt(ss / float64(max(len(want), 1)))
		bad := 0
		for i, w := range want {
			lim := 0x1p-8*(bound[i]+math.Abs(float64(w))) + compare.Tol(backend.F32)*(rms+math.Abs(float64(w)))
			if d := math.Abs(float64(got[i]) - float64(w)); !(d <= lim) {
				if bad < 5 {
					t.Errorf("%s[%d]: gpu %g, cpu %g (bound %.3g)", name, i, got[i], w, lim)
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d elements differ", name, bad, len(want))
		}
	}
	within("out", g.out, c.out, bOut)
	within("dqkv", g.dqkv, c.dqkv, bD)
}

// Attention through cuBLAS on an emulated GPU gives what the CPU
// backend's memory-efficient attention gives, forward and backward, at
// one row, an odd length and 300 rows (three chunks of 128, the last
// partial), with grouped key/value heads (two and four query heads a
// group, and none) at head sizes 64 and 128 and also 32, 80 and 96: fp32
// to fp32 rounding, bf16 within bf16 tolerance. A budget too small for
// more than 16 rows a chunk (19 chunks at T = 300, dK and dV accumulated
// in fp32 across them) gives the same answers.
func TestAttentionMatchesCPU(t *testing.T) {
	e := newEnv(t)
	var runs []attRun
	for _, dt := range []backend.DType{backend.F32, backend.BF16} {
		for _, T := range []int{1, 37} {
			for _, hk := range [][3]int{{64, 4, 2}, {128, 4, 1}, {32, 2, 2}, {80, 4, 2}, {96, 3, 1}} {
				runs = append(runs, attRun{B: 2, T: T, HD: hk[0], NH: hk[1], KV: hk[2], dt: dt, budget: attentionBudget})
			}
		}
		runs = append(runs,
			attRun{B: 1, T: 300, NH: 4, KV: 2, HD: 64, dt: dt, budget: attentionBudget},
			attRun{B: 1, T: 300, NH: 2, KV: 1, HD: 128, dt: dt, budget: attentionBudget},
			attRun{B: 1, T: 300, NH: 4, KV: 2, HD: 64, dt: dt, budget: 300 << 10},
			attRun{B: 2, T: 37, NH: 2, KV: 2, HD: 64, dt: dt, budget: 1},
		)
	}
	for i, a := range runs {
		name := a.String()
		if a.budget != attentionBudget {
			name += fmt.Sprintf("/budget%d/rows%d", a.budget, attnplan.ChunkRows(a.B, a.T, a.NH, a.HD, 0, a.budget))
		}
		t.Run(name, func(t *testing.T) { a.compareWithCPU(t, e.backend(t), uint64(i)) })
	}
}

// A head size of 300 (no multiple of 8, wider than any tile) with two
// query heads a group matches the CPU backend, and a second run gives the
// same bits: every sum has a fixed order (no atomics; a group's dK and dV
// are one GEMM's reduction).
func TestAttentionWideHeadsMatchCPUAndRepeat(t *testing.T) {
	e := newEnv(t)
	for _, dt := range []backend.DType{backend.F32, backend.BF16} {
		a := attRun{B: 1, T: 6, NH: 2, KV: 1, HD: 300, dt: dt, budget: attentionBudget}
		g := e.backend(t)
		a.compareWithCPU(t, g, 4)
		in := a.forward(t, g, 5)
		if first, again := a.backward(t, g, in), a.backward(t, g, in); !bytes.Equal(f32Bytes(first), f32Bytes(again)) {
			t.Errorf("%s: two runs of attention backward differ in their bits", dt)
		}
	}
}

// The workspace attention borrows is bounded by its budget, whatever T
// is: with a 1 MiB budget, T = 300 and T = 1024 both stay within it (the
// longer sequence takes more, smaller chunks, and sets aside its fp32 dK,
// dV accumulators first). The mocks count the structure of a call after
// the first: no allocation (the workspace is reused); per chunk two
// bf16 GEMMs forward and five backward, one call each (B = 1 ≤ KV: one
// strided batch over the key/value heads), no fp32 GEMM; per chunk the
// gather, softmax and scatter kernels forward, gather, P/dS and scatter
// backward, plus the two scatters of the accumulated dK and dV.
func TestAttentionWorkspaceBoundedByBudget(t *testing.T) {
	cnt := cudatest.NewCounters(t)
	e := newEnv(t)
	const budget = 1 << 20
	const B, NH, KV, HD = 1, 2, 1, 64
	peak := map[int]int64{}
	for _, T := range []int{300, 1024} {
		a := attRun{B: B, T: T, NH: NH, KV: KV, HD: HD, dt: backend.BF16, budget: budget}
		g := e.backend(t)
		r := rand.New(rand.NewPCG(1, 2))
		nqkv, nout := B*T*(NH+2*KV)*HD, B*T*NH*HD
		qkv, dout := upload(t, g, a.dt, normals(r, nqkv)), upload(t, g, a.dt, normals(r, nout))
		o, d := upload(t, g, a.dt, make([]float32, nout)), upload(t, g, a.dt, make([]float32, nqkv))
		l := upload(t, g, backend.F32, make([]float32, B*NH*T))
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
		g.ResetPeak()
		held := g.Memory().PoolTotal(backend.Device)
		step := func() (fwd, bwd cudatest.Counts) {
			c0 := cnt.Snapshot(t)
			g.attentionForward(o, l, qkv, B, T, NH, KV, HD, budget)
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}
			c1 := cnt.Snapshot(t)
			g.attentionBackward(d, dout, o, qkv, l, B, T, NH, KV, HD, budget)
			if err := g.Sync(); err != nil {
				t.Fatal(err)
			}
			return c1.Sub(c0), cnt.Snapshot(t).Sub(c1)
		}
		step()
		peak[T] = g.Memory().Peak[backend.Device] - held
		if peak[T] > budget {
			t.Errorf("T=%d: attention took %d bytes of workspace, budget %d", T, peak[T], budget)
		}
		// A second call reuses the workspace: the structure of every call
		// after the first.
		fwd, bwd := step()
		pl := attnplan.New(B, T, NH, KV, HD, backend.BF16, backend.BF16, budget)
		rows := pl.Rows
		if pl.AccBytes == 0 {
			t.Fatalf("T=%d: a bf16 dqkv in %d-row chunks should accumulate in fp32", T, rows)
		}
		cf := int64((T + rows - 1) / rows)
		cb := cf
		for _, c := range []struct {
			name      string
			got, want int64
		}{
			{"forward bf16 GEMMs", fwd.GEMMs[cudatest.InBF16][cudatest.Compute32F], 2 * cf},
			{"forward kernels", fwd.Launches, 3 * cf},
			{"backward bf16 GEMMs", bwd.GEMMs[cudatest.InBF16][cudatest.Compute32F], 5 * cb},
			{"backward kernels", bwd.Launches, 3*cb + 2},
			{"fp32 GEMMs", fwd.GEMMCalls(cudatest.InF32) + bwd.GEMMCalls(cudatest.InF32), 0},
			{"allocations", fwd.Allocations() + bwd.Allocations(), 0},
		} {
			if c.got != c.want {
				t.Errorf("T=%d: %s: %d, want %d", T, c.name, c.got, c.want)
			}
		}
		t.Logf("T=%d: %d bytes of workspace (budget %d); %d chunks forward, %d backward; forward %s; backward %s",
			T, peak[T], budget, cf, cb, fwd.StepLine("bf16"), bwd.StepLine("bf16"))
	}
	if peak[1024] <= 0 || peak[300] <= 0 {
		t.Errorf("no workspace measured: %v", peak)
	}
}

// AttentionPlan reports the chunks a call runs in: at T = 300 with 128-row
// chunks, three, and the mocks count two bf16 GEMMs a chunk forward and
// five backward; a bf16 dqkv over several chunks accumulates dK and dV in
// fp32, an fp32 one in itself; one chunk of bf16 (T = 100) needs no
// accumulators.
func TestAttentionPlanIsWhatRuns(t *testing.T) {
	cnt := cudatest.NewCounters(t)
	e := newEnv(t)
	g := e.backend(t)
	const B, T, NH, KV, HD = 1, 300, 4, 1, 64
	for _, c := range []struct {
		T    int
		dt   backend.DType
		want AttentionPlan
	}{
		{T, backend.BF16, AttentionPlan{Rows: 128, Chunks: 3, FP32Accumulators: true}},
		{T, backend.F32, AttentionPlan{Rows: 128, Chunks: 3}},
		{100, backend.BF16, AttentionPlan{Rows: 100, Chunks: 1}},
	} {
		if got := g.AttentionPlan(B, c.T, NH, KV, HD, c.dt); got != c.want {
			t.Errorf("T=%d %s: plan %+v, want %+v", c.T, c.dt, got, c.want)
		}
	}
	a := attRun{B: B, T: T, NH: NH, KV: KV, HD: HD, dt: backend.BF16, budget: attentionBudget}
	c0 := cnt.Snapshot(t)
	in := a.forward(t, g, 1)
	c1 := cnt.Snapshot(t)
	a.backward(t, g, in)
	fwd, bwd := c1.Sub(c0), cnt.Snapshot(t).Sub(c1)
	chunks := int64(g.AttentionPlan(B, T, NH, KV, HD, backend.BF16).Chunks)
	if n := fwd.GEMMs[cudatest.InBF16][cudatest.Compute32F]; n != 2*chunks {
		t.Errorf("forward: %d bf16 GEMMs, want 2 a chunk for %d chunks", n, chunks)
	}
	if n := bwd.GEMMs[cudatest.InBF16][cudatest.Compute32F]; n != 5*chunks {
		t.Errorf("backward: %d bf16 GEMMs, want 5 a chunk for %d chunks", n, chunks)
	}
}
