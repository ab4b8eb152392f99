package backendtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testAttention(t *testing.T, nb func(*testing.T) backend.Backend) {
	// GPT-2's layer shapes (KV = NH, HD = C/NH) in every storage mix.
	each(t, nb, func(h *harness, s shape, dc dtypeCase) {
		a := attnCase{B: s.B, T: s.T, NH: s.NH, KV: s.NH, HD: s.C / s.NH}
		a.check(h, dc.act, s.finiteDiffOK && dc.act == backend.F32)
	})
	// Grouped heads: KV = NH, GQA and MQA, at head sizes 16, 64 and 128 and
	// sequence lengths of one row, an odd count, a power of two and one past
	// a power of two (a partial tile after full ones), in fp32 against the
	// naive reference at 1e-5. At T = 257 each head size meets one of the
	// three groupings (the reference, and the CUDA kernels under emulation,
	// are O(T²) per head).
	seed := uint64(1000)
	for _, T := range []int{1, 7, 64, 257} {
		for i, HD := range []int{16, 64, 128} {
			for j, kv := range []int{4, 2, 1} {
				a := attnCase{B: 2, T: T, NH: 4, KV: kv, HD: HD}
				if T > 64 {
					if i+j != 2 {
						continue
					}
					a.B = 1
				}
				seed++
				t.Run("GQA/"+a.String(), func(t *testing.T) { a.check(newHarness(t, nb, seed), backend.F32, false) })
			}
		}
	}
	// Grouped heads in 16-bit storage, and finite differences through the
	// grouped key/value gradients (head size 5, three query heads a group).
	t.Run("GQA/B2T9NH6KV2HD5/bf16", func(t *testing.T) {
		attnCase{B: 2, T: 9, NH: 6, KV: 2, HD: 5}.check(newHarness(t, nb, 7), backend.BF16, false)
	})
	t.Run("GQA/B2T6NH6KV2HD5/finite-differences", func(t *testing.T) {
		attnCase{B: 2, T: 6, NH: 6, KV: 2, HD: 5}.check(newHarness(t, nb, 8), backend.F32, true)
	})
	t.Run("WorkspaceLinearInT", func(t *testing.T) { testAttentionWorkspace(t, nb) })
	t.Run("HeadsMustGroup", func(t *testing.T) {
		h := newHarness(t, nb, 9)
		const B, T, NH, KV, HD = 1, 2, 3, 2, 4
		qkv := h.alloc(backend.F32, B*T*(NH+2*KV)*HD)
		out, lse := h.alloc(backend.F32, B*T*NH*HD), h.alloc(backend.F32, B*NH*T)
		mustPanic(t, "AttentionForward with NH=3, KV=2", func() { h.be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD) })
	})
}

// attnCase is one attention problem: qkv (B,T,(NH+2·KV)·HD).
type attnCase struct{ B, T, NH, KV, HD int }

func (a attnCase) String() string {
	return fmt.Sprintf("B%dT%dNH%dKV%dHD%d", a.B, a.T, a.NH, a.KV, a.HD)
}

// check runs forward and backward on h's backend with activations stored as
// dt and compares out, lse and dqkv with the naive float64 reference (and,
// with fd, the reference's and the backend's dqkv with finite differences).
// A second backward must give the same bits: the group's key/value
// gradients are summed in a fixed order.
func (a attnCase) check(h *harness, dt backend.DType, fd bool) {
	B, T, NH, KV, HD := a.B, a.T, a.NH, a.KV, a.HD
	nqkv, nout := B*T*(NH+2*KV)*HD, B*T*NH*HD
	qkv, qkvV := h.put(dt, h.normal(nqkv, 1))
	out, _ := h.put(dt, nanFill(nout))
	lse, _ := h.put(backend.F32, nanFill(B*NH*T))
	h.be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
	want, wantLse := make([]float64, nout), make([]float64, B*NH*T)
	RefAttentionForward(want, wantLse, qkvV, B, T, NH, KV, HD)
	// With 16-bit storage a backend may round the probabilities (and
	// backward's dS) to the storage dtype before its tensor-core products:
	// each term of those sums may then be off by half an ulp; the
	// tolerance allows relFor(dt) (at least twice that) of the sum of the
	// terms' magnitudes.
	outTol := tolFor(dt, want, 1e-5)
	var boundOut, boundD []float64
	if dt != backend.F32 {
		boundOut, boundD = make([]float64, nout), make([]float64, nqkv)
		RefAttentionRoundingBound(boundOut, nil, qkvV, nil, nil, B, T, NH, KV, HD)
		outTol.elem = scaled(boundOut, relFor(dt))
	}
	check(h.t, "out", h.get(out), want, outTol)
	check(h.t, "lse", h.get(lse), wantLse, tolFor(backend.F32, wantLse, 1e-5))

	dout, doutV := h.put(dt, h.normal(nout, 1))
	dqkv, _ := h.put(dt, nanFill(nqkv))
	h.be.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
	g := make([]float64, nqkv)
	// Backward reads the out it is given through D = rowsum(dO∘out): in
	// 16-bit storage that is out rounded to dt (already checked against the
	// reference above), which the reference must use too.
	var outV []float64
	if dt != backend.F32 {
		outV = h.get(out)
	}
	RefAttentionBackward(g, doutV, outV, qkvV, B, T, NH, KV, HD)
	got := h.get(dqkv)
	dTol := tolFor(dt, g, 1e-5)
	if dt != backend.F32 {
		RefAttentionRoundingBound(nil, boundD, qkvV, doutV, outV, B, T, NH, KV, HD)
		dTol.elem = scaled(boundD, relFor(dt))
	}
	check(h.t, "dqkv", got, g, dTol)

	again, _ := h.put(dt, nanFill(nqkv))
	h.be.AttentionBackward(again, dout, out, qkv, lse, B, T, NH, KV, HD)
	if err := h.be.Sync(); err != nil {
		h.t.Fatal(err)
	}
	first, second := make([]byte, dqkv.Bytes()), make([]byte, again.Bytes())
	if err := h.be.Download(first, dqkv); err != nil {
		h.t.Fatal(err)
	}
	if err := h.be.Download(second, again); err != nil {
		h.t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		h.t.Errorf("two backward passes on the same inputs differ in their bits")
	}

	if fd {
		o := make([]float64, nout)
		L := func() float64 { RefAttentionForward(o, nil, qkvV, B, T, NH, KV, HD); return project(o, doutV) }
		fdg := finiteDiff(qkvV, L)
		check(h.t, "ref dqkv vs finite differences", g, fdg, fdTol(fdg))
		check(h.t, "dqkv vs finite differences", got, fdg, tolFor(backend.F32, fdg, 1e-5))
	}
}

// testAttentionWorkspace: what attention allocates beyond its arguments
// while it runs (the peak over the memory held before the call) may grow
// at most linearly with T: quadrupling T from 256 to 1024 may quadruple it
// (a per-row statistic), never multiply it by 16 as a (T,T) score matrix
// would. Backends whose scratch is not accounted (the CPU's tile pool; its
// own test counts that) show 0 here.
func testAttentionWorkspace(t *testing.T, nb func(*testing.T) backend.Backend) {
	extra := func(T int) int64 {
		h := newHarness(t, nb, uint64(T))
		const B, NH, KV, HD = 1, 1, 1, 16
		nqkv, nout := B*T*(NH+2*KV)*HD, B*T*NH*HD
		qkv, _ := h.put(backend.F32, h.normal(nqkv, 1))
		dout, _ := h.put(backend.F32, h.normal(nout, 1))
		out, lse, dqkv := h.alloc(backend.F32, nout), h.alloc(backend.F32, B*NH*T), h.alloc(backend.F32, nqkv)
		if err := h.be.Sync(); err != nil {
			t.Fatal(err)
		}
		h.be.ResetPeak()
		before := h.be.Memory()
		h.be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
		h.be.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
		if err := h.be.Sync(); err != nil {
			t.Fatal(err)
		}
		after := h.be.Memory()
		var x int64
		for _, p := range backend.Pools() {
			x += after.Peak[p] - before.PoolTotal(p)
		}
		return x
	}
	small, large := extra(256), extra(1024)
	t.Logf("attention workspace: %d bytes at T=256, %d at T=1024", small, large)
	if large > 4*small+4096 {
		t.Errorf("attention workspace grows faster than T: %d bytes at T=256, %d at T=1024 (a T² buffer would be 16×)", small, large)
	}
}

// scaled is v·k, elementwise.
func scaled(v []float64, k float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = k * x
	}
	return out
}
