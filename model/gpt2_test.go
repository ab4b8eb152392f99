package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

func newCPU() backend.Backend { return cpu.New(cpu.Options{Gemm: blas.Gonum{}}) }

// testParams are weights large enough that every path (attention, GELU's
// curve, LayerNorm gains) shapes the loss, unlike the near-linear N(0,0.02).
func testParams(cfg Config, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 2))
	lay := NewLayout(cfg)
	p := make([]float32, lay.NumParams())
	for _, ts := range lay.Tensors() {
		dst := p[ts.Offset : ts.Offset+ts.Len]
		for i := range dst {
			switch {
			case strings.Contains(ts.Name, "ln_") && strings.HasSuffix(ts.Name, ".weight"):
				dst[i] = float32(1 + 0.2*rng.NormFloat64())
			case ts.Decay:
				dst[i] = float32(0.4 * rng.NormFloat64())
			default:
				dst[i] = float32(0.1 * rng.NormFloat64())
			}
		}
	}
	for i := cfg.V * cfg.C; i < cfg.Vp*cfg.C; i++ {
		p[i] = 0
	}
	return p
}

func randomTokens(rng *rand.Rand, n, V int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(V))
	}
	return out
}

func f64s(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// closeTo is llm.c's t_eff rule: |got - want| ≤ atol + rtol·|want|.
func closeTo(got, want, atol, rtol float64) bool {
	return math.Abs(got-want) <= atol+rtol*math.Abs(want)
}

func newModel(t *testing.T, cfg Config, params []float32, opts Options) *tmodel {
	return newModelDT(t, cfg, params, opts, backend.F32)
}

func newModelDT(t *testing.T, cfg Config, params []float32, opts Options, pdt backend.DType) *tmodel {
	t.Helper()
	m, err := newTestModel(newCPU(), cfg, opts, pdt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Free)
	if err := m.SetParams(params); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestForwardBackwardMatchesFloat64(t *testing.T) {
	cfg := tinyConfig
	const B, T = 2, 5
	params := testParams(cfg, 11)
	rng := rand.New(rand.NewPCG(5, 5))
	inp, tgt := randomTokens(rng, B*T, cfg.V), randomTokens(rng, B*T, cfg.V)
	ref := &refGPT2{cfg: cfg, lay: NewLayout(cfg), p: f64s(params)}

	m := newModel(t, cfg, params, Options{})
	loss, err := m.Forward(inp, tgt, B, T)
	if err != nil {
		t.Fatal(err)
	}
	_, refLosses := ref.forward(inp, tgt, B, T)
	refLoss := ref.meanLoss(inp, tgt, B, T)
	if !closeTo(float64(loss), refLoss, 1e-6, 1e-5) {
		t.Errorf("loss %.7f, float64 reference %.7f", loss, refLoss)
	}
	losses, err := m.Losses()
	if err != nil {
		t.Fatal(err)
	}
	for i := range losses {
		if !closeTo(float64(losses[i]), refLosses[i], 1e-6, 1e-5) {
			t.Errorf("loss[%d] %.7f, reference %.7f", i, losses[i], refLosses[i])
		}
	}

	m.ZeroGrad()
	if err := m.Backward(1 / float32(B*T)); err != nil {
		t.Fatal(err)
	}
	grads, err := m.HostGrads()
	if err != nil {
		t.Fatal(err)
	}
	// Central differences of the float64 loss for every parameter. With
	// h = 1e-5 the truncation error is ~h²·f''' ≈ 1e-10 and rounding ~1e-11,
	// far below fp32's; the tolerance is fp32 accumulation error.
	const h = 1e-5
	var worst float64
	worstName := ""
	for _, ts := range ref.lay.Tensors() {
		for i := 0; i < ts.Len; i++ {
			k := ts.Offset + i
			orig := ref.p[k]
			ref.p[k] = orig + h
			up := ref.meanLoss(inp, tgt, B, T)
			ref.p[k] = orig - h
			down := ref.meanLoss(inp, tgt, B, T)
			ref.p[k] = orig
			fd := (up - down) / (2 * h)
			g := float64(grads[k])
			if ts.Name == "wte.weight" && i >= cfg.V*cfg.C {
				if g != 0 || fd != 0 {
					t.Errorf("padded wte element %d: grad %g, fd %g, want 0", i, g, fd)
				}
				continue
			}
			if !closeTo(g, fd, 2e-6, 1e-4) {
				t.Errorf("%s[%d]: grad %.8g, finite difference %.8g", ts.Name, i, g, fd)
			}
			if d := math.Abs(g - fd); d > worst {
				worst, worstName = d, fmt.Sprintf("%s[%d]", ts.Name, i)
			}
		}
	}
	t.Logf("largest |grad - fd| = %.3g at %s", worst, worstName)
}

func TestLogitsWithoutTargets(t *testing.T) {
	cfg := tinyConfig
	params := testParams(cfg, 12)
	ref := &refGPT2{cfg: cfg, lay: NewLayout(cfg), p: f64s(params)}
	m := newModel(t, cfg, params, Options{})
	rng := rand.New(rand.NewPCG(6, 6))
	// Shrinking then growing (B,T) reuses, then reallocates, activations.
	for _, bt := range [][2]int{{2, 5}, {1, 3}, {3, 8}} {
		B, T := bt[0], bt[1]
		inp := randomTokens(rng, B*T, cfg.V)
		if loss, err := m.Forward(inp, nil, B, T); err != nil || loss != 0 {
			t.Fatalf("B%d T%d: %v %v", B, T, loss, err)
		}
		refLogits, _ := ref.forward(inp, nil, B, T)
		all, err := backend.ReadF32(m.be, m.Logits())
		if err != nil || len(all) != B*T*cfg.Vp {
			t.Fatalf("logits: %d values, %v", len(all), err)
		}
		for n := 0; n < B*T; n++ {
			for v := 0; v < cfg.Vp; v++ {
				got := float64(all[n*cfg.Vp+v])
				if v >= cfg.V {
					if got != 0 {
						t.Fatalf("padded logit [%d,%d] = %g", n, v, got)
					}
					continue
				}
				if want := refLogits[n*cfg.V+v]; !closeTo(got, want, 1e-5, 1e-5) {
					t.Errorf("B%d T%d logit[%d,%d] = %.7f, want %.7f", B, T, n, v, got, want)
				}
			}
		}
		for b := 0; b < B; b++ {
			last, err := m.LastLogits(b)
			if err != nil || len(last) != cfg.V {
				t.Fatalf("LastLogits(%d): %d, %v", b, len(last), err)
			}
			for v := range last {
				if last[v] != all[(b*T+T-1)*cfg.Vp+v] {
					t.Fatalf("LastLogits(%d)[%d] = %v, logits hold %v", b, v, last[v], all[(b*T+T-1)*cfg.Vp+v])
				}
			}
		}
		if _, err := m.LastLogits(B); err == nil {
			t.Error("LastLogits past the batch")
		}
		if err := m.Backward(1); err == nil {
			t.Error("Backward after a Forward without targets")
		}
	}
}

func TestGradientAccumulation(t *testing.T) {
	cfg := tinyConfig
	params := testParams(cfg, 13)
	m := newModel(t, cfg, params, Options{})
	rng := rand.New(rand.NewPCG(7, 7))
	const B, T = 2, 6
	var batches [2][2][]int32
	for i := range batches {
		batches[i] = [2][]int32{randomTokens(rng, B*T, cfg.V), randomTokens(rng, B*T, cfg.V)}
	}
	one := func(i int) []float32 {
		m.ZeroGrad()
		if _, err := m.Forward(batches[i][0], batches[i][1], B, T); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(0.25); err != nil {
			t.Fatal(err)
		}
		g, _ := m.HostGrads()
		return g
	}
	g0, g1 := one(0), one(1)
	m.ZeroGrad()
	for i := range batches {
		if _, err := m.Forward(batches[i][0], batches[i][1], B, T); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(0.25); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Backward(0.25); err == nil {
		t.Error("second Backward for one Forward")
	}
	sum, _ := m.HostGrads()
	for i := range sum {
		want := float64(g0[i]) + float64(g1[i])
		if !closeTo(float64(sum[i]), want, 1e-7, 1e-5) {
			t.Fatalf("grad %d: accumulated %g, separate sum %g", i, sum[i], want)
		}
	}
}

func TestLogitChunksAndBatchSplit(t *testing.T) {
	// B·T = 320 rows: the loss runs in two chunks. The gradient of the whole
	// batch must equal the sum over its two halves (160 rows, one chunk each).
	cfg := tinyConfig
	params := testParams(cfg, 14)
	ref := &refGPT2{cfg: cfg, lay: NewLayout(cfg), p: f64s(params)}
	m := newModel(t, cfg, params, Options{})
	rng := rand.New(rand.NewPCG(8, 8))
	const B, T = 40, 8
	inp, tgt := randomTokens(rng, B*T, cfg.V), randomTokens(rng, B*T, cfg.V)
	loss, err := m.Forward(inp, tgt, B, T)
	if err != nil {
		t.Fatal(err)
	}
	if want := ref.meanLoss(inp, tgt, B, T); !closeTo(float64(loss), want, 1e-6, 1e-5) {
		t.Errorf("loss %.7f, reference %.7f", loss, want)
	}
	m.ZeroGrad()
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	whole, _ := m.HostGrads()
	m.ZeroGrad()
	half := B * T / 2
	for _, r := range [][2]int{{0, half}, {half, B * T}} {
		if _, err := m.Forward(inp[r[0]:r[1]], tgt[r[0]:r[1]], B/2, T); err != nil {
			t.Fatal(err)
		}
		if err := m.Backward(1); err != nil {
			t.Fatal(err)
		}
	}
	split, _ := m.HostGrads()
	for i := range whole {
		if !closeTo(float64(whole[i]), float64(split[i]), 1e-5, 1e-4) {
			t.Fatalf("grad %d: whole batch %g, halves %g", i, whole[i], split[i])
		}
	}
}

// TestParamStore: a model calls its store in the order its layout
// documents (AcquisitionOrder), pairing every Acquire with a Release, and a
// store error stops the pass and names the group.
func TestParamStore(t *testing.T) {
	cfg := tinyConfig // L = 2: groups 0 (embeddings), 1-2 (blocks), 3 (final)
	host := testParams(cfg, 15)
	ref := newModel(t, cfg, host, Options{})
	be := newCPU()
	inner, err := newTestModel(be, cfg, Options{}, backend.F32)
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Free()
	if err := inner.SetParams(host); err != nil {
		t.Fatal(err)
	}
	st := &recordingStore{ParamStore: inner.eng}
	m, err := New(be, cfg, Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	inp, tgt := []int32{1, 2, 3, 4}, []int32{2, 3, 4, 5}
	want, _ := ref.Forward(inp, tgt, 1, 4)
	got, err := m.Forward(inp, tgt, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("loss %v through the recording store, %v directly", got, want)
	}
	if err := ref.Backward(0.5); err != nil {
		t.Fatal(err)
	}
	if err := m.Backward(0.5); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(st.calls, " "),
		"A0f A1f R1f A2f R2f A3f R3f R0f "+
			"A0b A3b R3b A2b R2b A1b R1b R0b"; got != want {
		t.Errorf("store calls\n got %s\nwant %s", got, want)
	}
	// The first acquisitions of each pass follow the layout's order.
	var order [2][]string
	for _, c := range st.calls {
		if c[0] == 'A' {
			k := 0
			if c[len(c)-1] == 'b' {
				k = 1
			}
			order[k] = append(order[k], c[1:len(c)-1])
		}
	}
	for k, bw := range []bool{false, true} {
		var want []string
		for _, g := range m.Layout().AcquisitionOrder(bw) {
			want = append(want, fmt.Sprint(g))
		}
		if strings.Join(order[k], " ") != strings.Join(want, " ") {
			t.Errorf("backward %v: acquired %v, AcquisitionOrder says %v", bw, order[k], want)
		}
	}
	wg, _ := ref.HostGrads()
	gg, _ := inner.HostGrads()
	for i := range wg {
		if wg[i] != gg[i] {
			t.Fatalf("grad %d: %v through the recording store, %v directly", i, gg[i], wg[i])
		}
	}
	st.failAt = "A2f"
	if _, err := m.Forward(inp, tgt, 1, 4); err == nil || !strings.Contains(err.Error(), "block 1") {
		t.Errorf("store error: %v", err)
	}
}

// TestIgnoredTargets: negative targets add nothing. With causal attention
// position t's loss depends on inputs 0..t only, so a batch whose last
// targets are ignored has the loss (a mean over the others) and the
// gradient of the same batch cut before them. A batch with every target
// ignored has loss 0 and no gradient.
func TestIgnoredTargets(t *testing.T) {
	cfg := tinyConfig
	const T, keep = 6, 4
	params := testParams(cfg, 21)
	rng := rand.New(rand.NewPCG(9, 9))
	inp, tgt := randomTokens(rng, T, cfg.V), randomTokens(rng, T, cfg.V)
	m := newModel(t, cfg, params, Options{})

	masked := slices.Clone(tgt)
	masked[keep], masked[keep+1] = -100, -1
	loss, err := m.Forward(inp, masked, 1, T)
	if err != nil {
		t.Fatal(err)
	}
	m.ZeroGrad()
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	got, _ := m.HostGrads()
	losses, _ := m.Losses()
	if losses[keep] != 0 || losses[keep+1] != 0 {
		t.Errorf("ignored positions' losses %v, want 0", losses[keep:])
	}

	short, err := m.Forward(inp[:keep], tgt[:keep], 1, keep)
	if err != nil {
		t.Fatal(err)
	}
	m.ZeroGrad()
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	want, _ := m.HostGrads()
	if !closeTo(float64(loss), float64(short), 1e-6, 1e-5) {
		t.Errorf("loss with the last targets ignored %.7f, of the cut batch %.7f", loss, short)
	}
	for i := range want {
		if !closeTo(float64(got[i]), float64(want[i]), 1e-6, 1e-4) {
			t.Fatalf("grad %d: %g with ignored targets, %g for the cut batch", i, got[i], want[i])
		}
	}

	// Every target ignored: loss 0, no gradient.
	all := []int32{-100, -100, -100, -100, -100, -100}
	if l, err := m.Forward(inp, all, 1, T); err != nil || l != 0 {
		t.Fatalf("all ignored: loss %v, %v", l, err)
	}
	m.ZeroGrad()
	if err := m.Backward(1); err != nil {
		t.Fatal(err)
	}
	g, _ := m.HostGrads()
	for i, v := range g {
		if v != 0 {
			t.Fatalf("all ignored: grad %d = %g", i, v)
		}
	}
}

func TestForwardRejectsBadBatches(t *testing.T) {
	cfg := tinyConfig
	m := newModel(t, cfg, testParams(cfg, 16), Options{})
	cases := []struct {
		inp, tgt []int32
		B, T     int
	}{
		{make([]int32, 9), nil, 1, 9},         // T > maxT
		{make([]int32, 4), nil, 1, 5},         // length
		{[]int32{0, 11}, nil, 1, 2},           // id = V
		{[]int32{-1, 1}, []int32{0, 0}, 1, 2}, // negative input (a negative target is an ignored one)
		{[]int32{0, 1}, []int32{0}, 1, 2},     // targets length
		{nil, nil, 0, 1},                      // B = 0
	}
	for i, c := range cases {
		if _, err := m.Forward(c.inp, c.tgt, c.B, c.T); err == nil {
			t.Errorf("case %d accepted", i)
		}
	}
	if err := m.Backward(1); err == nil {
		t.Error("Backward without Forward")
	}
	if _, err := m.Losses(); err == nil {
		t.Error("Losses without Forward")
	}
	if _, err := New(newCPU(), cfg, Options{}); err == nil {
		t.Error("a model without a ParamStore")
	}
}

func TestActivationAccounting(t *testing.T) {
	cfg := mustPreset(t, "gpt2-tiny")
	be := newCPU()
	m, err := newTestModel(be, cfg, Options{}, backend.F32)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	const B, T = 8, 256
	if err := m.ReserveActivations(B, T); err != nil {
		t.Fatal(err)
	}
	held := be.Memory().Current[backend.Device][backend.Activations]
	if held != m.ActivationBytes() || held != ActivationBytes(cfg, B, T, backend.F32, false) {
		t.Errorf("backend holds %d activation bytes, model says %d, estimate %d", held, m.ActivationBytes(), ActivationBytes(cfg, B, T, backend.F32, false))
	}
	// The (N,Vp) fp32 probabilities are one buffer, not two or three.
	probs := int64(B * T * cfg.Vp * 4)
	if held < probs || held > 2*probs {
		t.Errorf("activations %d bytes for %d bytes of probabilities", held, probs)
	}
	p := be.Memory().Current[backend.Device]
	if p[backend.Params] != int64(4*cfg.NumParams()) || p[backend.Grads] != int64(4*cfg.NumParams()) {
		t.Errorf("params %d grads %d bytes, want %d each", p[backend.Params], p[backend.Grads], 4*cfg.NumParams())
	}
	t.Logf("gpt2-tiny B%d T%d fp32: %.1f MiB activations", B, T, float64(held)/(1<<20))
}

func readBuffer(m *tmodel, b backend.Buffer) ([]float32, error) { return backend.ReadF32(m.be, b) }

func TestBF16Model(t *testing.T) {
	// bf16 parameters and activations, fp32 gradients: the loss and the
	// gradient direction must stay close to the float64 reference run on
	// the bf16-rounded weights (bf16 keeps 8 significant bits, ~0.4%).
	cfg := tinyConfig
	params := testParams(cfg, 17)
	rounded := make([]float32, len(params))
	for i, p := range params {
		rounded[i] = backend.F32FromBF16(backend.BF16FromF32(p))
	}
	ref := &refGPT2{cfg: cfg, lay: NewLayout(cfg), p: f64s(rounded)}
	m := newModelDT(t, cfg, params, Options{ActDType: backend.BF16}, backend.BF16)
	held := m.be.Memory().Current[backend.Device]
	if n := int64(NewLayout(cfg).NumParams()); held[backend.Params] != 2*n || held[backend.Grads] != 4*n {
		t.Fatalf("params %d, grads %d bytes: want bf16 parameters and fp32 gradients (%d and %d)", held[backend.Params], held[backend.Grads], 2*n, 4*n)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	const B, T = 2, 8
	inp, tgt := randomTokens(rng, B*T, cfg.V), randomTokens(rng, B*T, cfg.V)
	loss, err := m.Forward(inp, tgt, B, T)
	if err != nil {
		t.Fatal(err)
	}
	want := ref.meanLoss(inp, tgt, B, T)
	if !closeTo(float64(loss), want, 0, 0.03) {
		t.Errorf("bf16 loss %.5f, reference %.5f", loss, want)
	}
	m.ZeroGrad()
	if err := m.Backward(1 / float32(B*T)); err != nil {
		t.Fatal(err)
	}
	g, _ := m.HostGrads()
	fp32 := newModel(t, cfg, rounded, Options{})
	fp32.Forward(inp, tgt, B, T)
	fp32.ZeroGrad()
	if err := fp32.Backward(1 / float32(B*T)); err != nil {
		t.Fatal(err)
	}
	g32, _ := fp32.HostGrads()
	var dot, n1, n2 float64
	for i := range g {
		dot += float64(g[i]) * float64(g32[i])
		n1 += float64(g[i]) * float64(g[i])
		n2 += float64(g32[i]) * float64(g32[i])
	}
	if cos := dot / math.Sqrt(n1*n2); cos < 0.99 {
		t.Errorf("bf16 gradient cosine to fp32 %.4f, want ≥ 0.99", cos)
	}
}
