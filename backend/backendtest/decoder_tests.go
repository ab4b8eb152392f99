package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// RunDecoder runs the tests of backend.DecoderOps (RMSNorm and its fused
// residual variant, the QKV rotary with and without Qwen3's norms, SwiGLU)
// as subtests of t, on every decoder shape and dtype case, when the backends
// newBackend returns implement them. It reports whether they did; Run calls
// it and marks the part skipped when they do not, so a backend's own test
// can insist that it ran.
func RunDecoder(t *testing.T, newBackend func(*testing.T) backend.Backend) bool {
	if _, ok := newBackend(t).(backend.DecoderOps); !ok {
		return false
	}
	t.Run("RMSNorm", func(t *testing.T) { eachDecoder(t, newBackend, testRMSNorm) })
	t.Run("ResidualRMSNorm", func(t *testing.T) { eachDecoder(t, newBackend, testResidualRMSNorm) })
	t.Run("QKVRotary", func(t *testing.T) { eachDecoder(t, newBackend, testQKVRotary) })
	t.Run("SwiGLU", func(t *testing.T) { eachDecoder(t, newBackend, testSwiGLU) })
	return true
}

// decoderShape is a Llama-family layer shape: N = B·T rows of C for
// RMSNorm, NH query and KV key/value heads of HD for the rotary, I
// intermediate columns for SwiGLU. Odd shapes (HD = 2 and 6, MQA, T = 1, I
// odd) get finite-difference checks.
type decoderShape struct {
	name                string
	B, T, NH, KV, HD, C int
	I                   int
	finiteDiffOK        bool
}

func decoderShapes() []decoderShape {
	return []decoderShape{
		{name: "B2T3NH6KV2HD6C10I7", B: 2, T: 3, NH: 6, KV: 2, HD: 6, C: 10, I: 7, finiteDiffOK: true},
		{name: "B1T1NH3KV1HD2C6I3", B: 1, T: 1, NH: 3, KV: 1, HD: 2, C: 6, I: 3, finiteDiffOK: true},
		{name: "B3T5NH2KV2HD4C9I5", B: 3, T: 5, NH: 2, KV: 2, HD: 4, C: 9, I: 5, finiteDiffOK: true},
		// HD = 32 and 64 fill whole vector registers; I > pieceLen-sized
		// pieces; N = 19 rows of C = 1024 split raggedly over goroutines.
		{name: "B2T37NH4KV2HD32C96I171", B: 2, T: 37, NH: 4, KV: 2, HD: 32, C: 96, I: 171},
		{name: "B1T19NH8KV4HD64C1024I2051", B: 1, T: 19, NH: 8, KV: 4, HD: 64, C: 1024, I: 2051},
	}
}

// eachDecoder runs fn as a subtest for every decoder shape and dtype case
// with a fresh harness seeded from both.
func eachDecoder(t *testing.T, newBackend func(*testing.T) backend.Backend,
	fn func(h *harness, ops backend.DecoderOps, s decoderShape, dc dtypeCase)) {
	for si, s := range decoderShapes() {
		for di, dc := range dtypeCases() {
			t.Run(s.name+"/"+dc.name, func(t *testing.T) {
				h := newHarness(t, newBackend, uint64(1000+100*si+di))
				fn(h, h.be.(backend.DecoderOps), s, dc)
			})
		}
	}
}

// decoderEps are the rms_norm_eps values of the published configs: 1e-6
// (Qwen2, Qwen3, Llama 2) and 1e-5 (Llama 3, Mistral).
func decoderEps() []float32 { return []float32{1e-6, 1e-5} }

// rmsRows returns N rows of C draws from N(0, 1) where every third row is
// scaled by 0.01, so that mean(x²) ≈ 1e-4 and eps = 1e-5 moves rstd by 5%.
func rmsRows(h *harness, N, C int) []float64 {
	xs := h.normal(N*C, 1)
	for i := range xs {
		if (i/C)%3 == 1 {
			xs[i] *= 0.01
		}
	}
	return xs
}

// nearOne returns n draws of 1 + N(0, 0.1²), a norm weight near its init.
func nearOne(h *harness, n int) []float64 {
	w := h.normal(n, 0.1)
	for i := range w {
		w[i]++
	}
	return w
}

func testRMSNorm(h *harness, ops backend.DecoderOps, s decoderShape, dc dtypeCase) {
	N, C := s.B*s.T, s.C
	inp, inpV := h.put(dc.act, rmsRows(h, N, C))
	weight, weightV := h.put(dc.param, nearOne(h, C))
	for _, eps := range decoderEps() {
		e64 := float64(eps)
		out, _ := h.put(dc.act, nanFill(N*C))
		rstd, _ := h.put(backend.F32, nanFill(N))
		ops.RMSNormForward(out, rstd, inp, weight, N, C, eps)
		want, wantRstd := make([]float64, N*C), make([]float64, N)
		RefRMSNormForward(want, wantRstd, inpV, weightV, N, C, e64)
		check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-5))
		check(h.t, "rstd", h.get(rstd), wantRstd, tolFor(backend.F32, wantRstd, 1e-5))

		dout, doutV := h.put(dc.act, h.normal(N*C, 1))
		dinp, _ := h.put(dc.act, nanFill(N*C)) // = semantics: garbage must not leak
		dweight, dweightV := h.put(dc.param, h.normal(C, 1))
		ops.RMSNormBackward(dinp, dweight, dout, inp, weight, rstd, N, C)
		gi, gw := make([]float64, N*C), make([]float64, C)
		RefRMSNormBackward(gi, gw, doutV, inpV, weightV, wantRstd, N, C)
		gotI, gotW := h.get(dinp), h.get(dweight)
		check(h.t, "dinp", gotI, gi, tolFor(dc.act, gi, 1e-5))
		check(h.t, "dweight", gotW, add(dweightV, gw), tolFor(dc.param, add(dweightV, gw), 1e-5))
		frozen, _ := h.put(dc.act, nanFill(N*C)) // a frozen norm: the same dinp
		ops.RMSNormBackward(frozen, backend.Buffer{}, dout, inp, weight, rstd, N, C)
		same(h.t, "dinp of a frozen norm", h.get(frozen), gotI)

		if s.finiteDiffOK && dc.act == backend.F32 && dc.param == backend.F32 {
			o, r := make([]float64, N*C), make([]float64, N)
			L := func() float64 { RefRMSNormForward(o, r, inpV, weightV, N, C, e64); return project(o, doutV) }
			fdI, fdW := finiteDiff(inpV, L), finiteDiff(weightV, L)
			check(h.t, "ref dinp vs finite differences", gi, fdI, fdTol(fdI))
			check(h.t, "ref dweight vs finite differences", gw, fdW, fdTol(fdW))
			check(h.t, "dinp vs finite differences", gotI, fdI, tolFor(backend.F32, fdI, 1e-5))
			check(h.t, "dweight vs finite differences", sub(gotW, dweightV), fdW, tolFor(backend.F32, fdW, 1e-5))
		}
	}
}

// testResidualRMSNorm checks the fused op is bit-identical to Add then
// RMSNormForward on the same backend, with residual separate and aliasing
// either input, and that the pair matches the reference.
func testResidualRMSNorm(h *harness, ops backend.DecoderOps, s decoderShape, dc dtypeCase) {
	N, C := s.B*s.T, s.C
	aVals, bVals := rmsRows(h, N, C), h.normal(N*C, 0.01)
	weight, weightV := h.put(dc.param, nearOne(h, C))
	for _, eps := range decoderEps() {
		// The two-op sequence, the yardstick.
		a, aV := h.put(dc.act, aVals)
		b, bV := h.put(dc.param, bVals)
		res, out, rstd := h.alloc(dc.act, N*C), h.alloc(dc.act, N*C), h.alloc(backend.F32, N)
		h.be.Add(res, a, b, N*C)
		ops.RMSNormForward(out, rstd, res, weight, N, C, eps)
		wantRes := h.get(res)
		check(h.t, "residual", wantRes, add(aV, bV), tolFor(dc.act, add(aV, bV), 1e-6))
		// The stored residual, not the exact sum, is what gets normalised.
		want, wantRstd := make([]float64, N*C), make([]float64, N)
		RefRMSNormForward(want, wantRstd, wantRes, weightV, N, C, float64(eps))
		check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-5))
		check(h.t, "rstd", h.get(rstd), wantRstd, tolFor(backend.F32, wantRstd, 1e-5))

		for _, alias := range []string{"none", "a", "b"} {
			fa, _ := h.put(dc.act, aVals)
			fb, _ := h.put(dc.param, bVals)
			fres, _ := h.put(dc.act, nanFill(N*C))
			switch alias {
			case "a":
				fres = fa
			case "b":
				fb, _ = h.put(dc.act, bVals) // the residual stream's dtype
				fres = fb
				// The yardstick for b in the activation dtype.
				bb, _ := h.put(dc.act, bVals)
				h.be.Add(res, a, bb, N*C)
				ops.RMSNormForward(out, rstd, res, weight, N, C, eps)
			}
			fout, _ := h.put(dc.act, nanFill(N*C))
			frstd, _ := h.put(backend.F32, nanFill(N))
			ops.ResidualRMSNormForward(fres, fout, frstd, fa, fb, weight, N, C, eps)
			sameBits(h, "fused residual (alias "+alias+")", fres, res)
			sameBits(h, "fused out (alias "+alias+")", fout, out)
			sameBits(h, "fused rstd (alias "+alias+")", frstd, rstd)
		}
	}
}

// sameBits fails unless the buffers got and want hold the same bits.
func sameBits(h *harness, name string, got, want backend.Buffer) {
	h.t.Helper()
	same(h.t, name, h.get(got), h.get(want))
}

func testQKVRotary(h *harness, ops backend.DecoderOps, s decoderShape, dc dtypeCase) {
	B, T, NH, KV, HD := s.B, s.T, s.NH, s.KV, s.HD
	W := (NH + 2*KV) * HD
	n, nr := B*T*W, B*T*(NH+KV)
	cosV, sinV := RefRotaryTable(T, HD, RefRopeInvFreq(HD, 1000))
	cos, cosV := h.put(backend.F32, cosV)
	sin, sinV := h.put(backend.F32, sinV)
	fdOK := s.finiteDiffOK && dc.act == backend.F32 && dc.param == backend.F32
	// Every third head small, where eps matters, except on the
	// finite-difference shapes: normalising a head of 2 to 6 values that
	// small curves too sharply for central differences with a step of 1e-5.
	small := 0.01
	if fdOK {
		small = 1
	}
	xs := h.normal(n, 1)
	for i := range xs {
		if (i/HD)%3 == 1 {
			xs[i] *= small
		}
	}
	qkv, qkvV := h.put(dc.act, xs)
	doutVals := h.normal(n, 1)
	dout, doutV := h.put(dc.act, doutVals)

	// Without norms, out of place.
	out, _ := h.put(dc.act, nanFill(n))
	ops.QKVRotaryForward(out, backend.Buffer{}, qkv, backend.Buffer{}, backend.Buffer{}, cos, sin, B, T, NH, KV, HD, 0)
	want := make([]float64, n)
	RefQKVRotaryForward(want, nil, qkvV, nil, nil, cosV, sinV, B, T, NH, KV, HD, 0)
	check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-6))
	dqkv, _ := h.put(dc.act, nanFill(n))
	none := backend.Buffer{}
	ops.QKVRotaryBackward(dqkv, none, none, dout, qkv, none, none, none, cos, sin, B, T, NH, KV, HD)
	g := make([]float64, n)
	RefQKVRotaryBackward(g, nil, nil, doutV, qkvV, nil, nil, nil, cosV, sinV, B, T, NH, KV, HD)
	got := h.get(dqkv)
	check(h.t, "dqkv", got, g, tolFor(dc.act, g, 1e-6))
	if fdOK {
		o := make([]float64, n)
		L := func() float64 {
			RefQKVRotaryForward(o, nil, qkvV, nil, nil, cosV, sinV, B, T, NH, KV, HD, 0)
			return project(o, doutV)
		}
		fd := finiteDiff(qkvV, L)
		check(h.t, "ref dqkv vs finite differences", g, fd, fdTol(fd))
		check(h.t, "dqkv vs finite differences", got, fd, tolFor(backend.F32, fd, 1e-5))
	}

	// Without norms, in place: out aliases qkv, dqkv aliases dout.
	inPlace, _ := h.put(dc.act, xs)
	ops.QKVRotaryForward(inPlace, none, inPlace, none, none, cos, sin, B, T, NH, KV, HD, 0)
	check(h.t, "out in place", h.get(inPlace), want, tolFor(dc.act, want, 1e-6))
	dInPlace, _ := h.put(dc.act, doutVals)
	ops.QKVRotaryBackward(dInPlace, none, none, dInPlace, qkv, none, none, none, cos, sin, B, T, NH, KV, HD)
	check(h.t, "dqkv in place", h.get(dInPlace), g, tolFor(dc.act, g, 1e-6))

	// With Qwen3's per-head norms.
	qnorm, qnormV := h.put(dc.param, nearOne(h, HD))
	knorm, knormV := h.put(dc.param, nearOne(h, HD))
	for _, eps := range decoderEps() {
		e64 := float64(eps)
		out, _ := h.put(dc.act, nanFill(n))
		rstd, _ := h.put(backend.F32, nanFill(nr))
		ops.QKVRotaryForward(out, rstd, qkv, qnorm, knorm, cos, sin, B, T, NH, KV, HD, eps)
		want, wantRstd := make([]float64, n), make([]float64, nr)
		RefQKVRotaryForward(want, wantRstd, qkvV, qnormV, knormV, cosV, sinV, B, T, NH, KV, HD, e64)
		check(h.t, "normed out", h.get(out), want, tolFor(dc.act, want, 1e-5))
		check(h.t, "rstd", h.get(rstd), wantRstd, tolFor(backend.F32, wantRstd, 1e-5))

		dqkv, _ := h.put(dc.act, nanFill(n))
		dqnorm, dqnormV := h.put(dc.param, h.normal(HD, 1))
		dknorm, dknormV := h.put(dc.param, h.normal(HD, 1))
		ops.QKVRotaryBackward(dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin, B, T, NH, KV, HD)
		g, gq, gk := make([]float64, n), make([]float64, HD), make([]float64, HD)
		RefQKVRotaryBackward(g, gq, gk, doutV, qkvV, qnormV, knormV, wantRstd, cosV, sinV, B, T, NH, KV, HD)
		got, gotQ, gotK := h.get(dqkv), h.get(dqnorm), h.get(dknorm)
		check(h.t, "normed dqkv", got, g, tolFor(dc.act, g, 1e-5))
		check(h.t, "dqnorm", gotQ, add(dqnormV, gq), tolFor(dc.param, add(dqnormV, gq), 1e-5))
		check(h.t, "dknorm", gotK, add(dknormV, gk), tolFor(dc.param, add(dknormV, gk), 1e-5))
		frozen, _ := h.put(dc.act, nanFill(n)) // frozen norms: the same dqkv
		ops.QKVRotaryBackward(frozen, none, none, dout, qkv, qnorm, knorm, rstd, cos, sin, B, T, NH, KV, HD)
		same(h.t, "normed dqkv with frozen norms", h.get(frozen), got)

		if fdOK {
			o, r := make([]float64, n), make([]float64, nr)
			L := func() float64 {
				RefQKVRotaryForward(o, r, qkvV, qnormV, knormV, cosV, sinV, B, T, NH, KV, HD, e64)
				return project(o, doutV)
			}
			fd, fdQ, fdK := finiteDiff(qkvV, L), finiteDiff(qnormV, L), finiteDiff(knormV, L)
			check(h.t, "ref normed dqkv vs finite differences", g, fd, fdTol(fd))
			check(h.t, "ref dqnorm vs finite differences", gq, fdQ, fdTol(fdQ))
			check(h.t, "ref dknorm vs finite differences", gk, fdK, fdTol(fdK))
			check(h.t, "normed dqkv vs finite differences", got, fd, tolFor(backend.F32, fd, 1e-5))
			check(h.t, "dqnorm vs finite differences", sub(gotQ, dqnormV), fdQ, tolFor(backend.F32, fdQ, 1e-5))
			check(h.t, "dknorm vs finite differences", sub(gotK, dknormV), fdK, tolFor(backend.F32, fdK, 1e-5))
		}
	}
}

func testSwiGLU(h *harness, ops backend.DecoderOps, s decoderShape, dc dtypeCase) {
	N, I := s.B*s.T, s.I
	xs := h.normal(N*2*I, 3)
	// The tails of the gate, where e^−g overflows one way and vanishes the
	// other, spread over rows and columns.
	tails := []float64{-100, -90, -30, -12, 0, 1e-4, -1e-4, 12, 30, 90, 100}
	for k, v := range tails {
		xs[(k%N)*2*I+(3*k)%I] = v
	}
	inp, inpV := h.put(dc.act, xs)
	out, _ := h.put(dc.act, nanFill(N*I))
	ops.SwiGLUForward(out, inp, N, I)
	want := make([]float64, N*I)
	RefSwiGLUForward(want, inpV, N, I)
	check(h.t, "out", h.get(out), want, tolFor(dc.act, want, 1e-5))

	dout, doutV := h.put(dc.act, h.normal(N*I, 1))
	dinp, _ := h.put(dc.act, nanFill(N*2*I))
	ops.SwiGLUBackward(dinp, dout, inp, N, I)
	g := make([]float64, N*2*I)
	RefSwiGLUBackward(g, doutV, inpV, N, I)
	got := h.get(dinp)
	check(h.t, "dinp", got, g, tolFor(dc.act, g, 1e-5))

	if s.finiteDiffOK && dc.act == backend.F32 {
		o := make([]float64, N*I)
		L := func() float64 { RefSwiGLUForward(o, inpV, N, I); return project(o, doutV) }
		fd := finiteDiff(inpV, L)
		check(h.t, "ref dinp vs finite differences", g, fd, fdTol(fd))
		check(h.t, "dinp vs finite differences", got, fd, tolFor(backend.F32, fd, 1e-5))
	}
}
