package backendtest

import (
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// Benchmark helpers: each allocates its operands on the device pool, fills
// them with seeded random data, runs one op per iteration (with a Sync, so
// asynchronous backends are timed honestly) and reports throughput.
// Compute-bound ops report GFLOP/s with the FLOP count stated on the helper;
// memory-bound ops report bytes moved per second via b.SetBytes (MB/s).

type bencher struct {
	b   *testing.B
	be  backend.Backend
	rng *rand.Rand
}

func newBencher(b *testing.B, be backend.Backend) *bencher {
	return &bencher{b: b, be: be, rng: rand.New(rand.NewPCG(7, 7))}
}

// buf returns n elements of dt holding N(0, sd²) draws.
func (x *bencher) buf(dt backend.DType, n int, sd float64) backend.Buffer {
	x.b.Helper()
	buf, err := x.be.Alloc(backend.Device, backend.Activations, dt, n)
	if err != nil {
		x.b.Fatal(err)
	}
	x.b.Cleanup(func() { x.be.Free(buf) })
	if sd != 0 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(x.rng.NormFloat64() * sd)
		}
		if err := backend.WriteF32(x.be, buf, v); err != nil {
			x.b.Fatal(err)
		}
	}
	return buf
}

// ints returns n random ids in [0, max).
func (x *bencher) ints(n, max int) backend.Buffer {
	x.b.Helper()
	buf := x.buf(backend.I32, n, 0)
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(x.rng.IntN(max))
	}
	if err := backend.WriteI32(x.be, buf, v); err != nil {
		x.b.Fatal(err)
	}
	return buf
}

// run times op and reports flops per call as GFLOP/s (when flops > 0).
func (x *bencher) run(flops float64, op func()) {
	x.b.Helper()
	for x.b.Loop() {
		op()
		if err := x.be.Sync(); err != nil {
			x.b.Fatal(err)
		}
	}
	if flops > 0 {
		x.b.ReportMetric(flops*float64(x.b.N)/x.b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
}

// BenchMatmulForward times out (N,OC) = inp (N,C)·weight (OC,C)ᵀ + bias,
// counting 2·N·C·OC FLOPs.
func BenchMatmulForward(b *testing.B, be backend.Backend, dt backend.DType, N, C, OC int) {
	x := newBencher(b, be)
	out, inp := x.buf(dt, N*OC, 0), x.buf(dt, N*C, 1)
	w, bias := x.buf(dt, OC*C, 0.02), x.buf(dt, OC, 0.02)
	x.run(2*float64(N)*float64(C)*float64(OC), func() { be.MatmulForward(out, inp, w, bias, N, C, OC) })
}

// BenchMatmulBackward times dinp, dweight and dbias, counting 4·N·C·OC FLOPs
// (two GEMMs; the bias reduction is not counted).
func BenchMatmulBackward(b *testing.B, be backend.Backend, dt backend.DType, N, C, OC int) {
	x := newBencher(b, be)
	dinp, dw, db := x.buf(dt, N*C, 0), x.buf(dt, OC*C, 0), x.buf(dt, OC, 0)
	dout, inp, w := x.buf(dt, N*OC, 1), x.buf(dt, N*C, 1), x.buf(dt, OC*C, 0.02)
	x.run(4*float64(N)*float64(C)*float64(OC), func() { be.MatmulBackward(dinp, dw, db, dout, inp, w, N, C, OC) })
}

// attentionFLOPs counts only the causal half that is needed: Q·Kᵀ and P·V
// each take T(T+1)/2 ≈ T²/2 dot products of HD per head, so the forward is
// 2·B·NH·T²·HD FLOPs (the same count llm.c's CPU loops perform) and the
// backward, four such products, twice that (recomputing the scores, a fifth
// product, is not counted: the figures compare with a backward that stores
// them).
func attentionFLOPs(B, T, NH, HD int) float64 {
	return 2 * float64(B) * float64(T) * float64(T) * float64(NH*HD)
}

// BenchAttentionForward times causal attention forward over qkv
// (B,T,(NH+2·KV)·HD), counting 2·B·NH·T²·HD FLOPs.
func BenchAttentionForward(b *testing.B, be backend.Backend, dt backend.DType, B, T, NH, KV, HD int) {
	x := newBencher(b, be)
	out, lse, qkv := x.buf(dt, B*T*NH*HD, 0), x.buf(backend.F32, B*NH*T, 0), x.buf(dt, B*T*(NH+2*KV)*HD, 1)
	x.run(attentionFLOPs(B, T, NH, HD), func() { be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD) })
}

// BenchAttentionBackward times causal attention backward, counting
// 4·B·NH·T²·HD FLOPs.
func BenchAttentionBackward(b *testing.B, be backend.Backend, dt backend.DType, B, T, NH, KV, HD int) {
	x := newBencher(b, be)
	out, lse, qkv := x.buf(dt, B*T*NH*HD, 0), x.buf(backend.F32, B*NH*T, 0), x.buf(dt, B*T*(NH+2*KV)*HD, 1)
	be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
	dqkv, dout := x.buf(dt, B*T*(NH+2*KV)*HD, 0), x.buf(dt, B*T*NH*HD, 1)
	x.run(2*attentionFLOPs(B, T, NH, HD), func() { be.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD) })
}

// BenchLayerNormForward reports bytes/s over inp read and out written.
func BenchLayerNormForward(b *testing.B, be backend.Backend, dt backend.DType, N, C int) {
	x := newBencher(b, be)
	out, mean, rstd := x.buf(dt, N*C, 0), x.buf(backend.F32, N, 0), x.buf(backend.F32, N, 0)
	inp, w, bias := x.buf(dt, N*C, 1), x.buf(dt, C, 1), x.buf(dt, C, 0.1)
	b.SetBytes(int64(2 * N * C * dt.Size()))
	x.run(0, func() { be.LayerNormForward(out, mean, rstd, inp, w, bias, N, C) })
}

// BenchLayerNormBackward reports bytes/s over dout and inp read and dinp
// written.
func BenchLayerNormBackward(b *testing.B, be backend.Backend, dt backend.DType, N, C int) {
	x := newBencher(b, be)
	out, mean, rstd := x.buf(dt, N*C, 0), x.buf(backend.F32, N, 0), x.buf(backend.F32, N, 0)
	inp, w, bias := x.buf(dt, N*C, 1), x.buf(dt, C, 1), x.buf(dt, C, 0.1)
	be.LayerNormForward(out, mean, rstd, inp, w, bias, N, C)
	dinp, dw, db, dout := x.buf(dt, N*C, 0), x.buf(dt, C, 0), x.buf(dt, C, 0), x.buf(dt, N*C, 1)
	b.SetBytes(int64(3 * N * C * dt.Size()))
	x.run(0, func() { be.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, C) })
}

// BenchGeluForward reports bytes/s over inp read and out written.
func BenchGeluForward(b *testing.B, be backend.Backend, dt backend.DType, N int) {
	x := newBencher(b, be)
	out, inp := x.buf(dt, N, 0), x.buf(dt, N, 1)
	b.SetBytes(int64(2 * N * dt.Size()))
	x.run(0, func() { be.GeluForward(out, inp, N) })
}

// BenchGeluBackward reports bytes/s over inp and dout read and dinp written.
func BenchGeluBackward(b *testing.B, be backend.Backend, dt backend.DType, N int) {
	x := newBencher(b, be)
	dinp, inp, dout := x.buf(dt, N, 0), x.buf(dt, N, 1), x.buf(dt, N, 1)
	b.SetBytes(int64(3 * N * dt.Size()))
	x.run(0, func() { be.GeluBackward(dinp, inp, dout, N) })
}

// BenchAdd reports bytes/s over a and b read and out written.
func BenchAdd(b *testing.B, be backend.Backend, dt backend.DType, N int) {
	x := newBencher(b, be)
	out, p, q := x.buf(dt, N, 0), x.buf(dt, N, 1), x.buf(dt, N, 1)
	b.SetBytes(int64(3 * N * dt.Size()))
	x.run(0, func() { be.Add(out, p, q, N) })
}

// BenchEncoderForward reports bytes/s over out written and the rows of wte
// and wpe read.
func BenchEncoderForward(b *testing.B, be backend.Backend, dt backend.DType, B, T, C, Vp int) {
	x := newBencher(b, be)
	out, inp := x.buf(dt, B*T*C, 0), x.ints(B*T, Vp)
	wte, wpe := x.buf(dt, Vp*C, 0.02), x.buf(dt, T*C, 0.02)
	b.SetBytes(int64(3 * B * T * C * dt.Size()))
	x.run(0, func() { be.EncoderForward(out, inp, wte, wpe, B, T, C) })
}

// BenchEncoderBackward reports bytes/s over dout read and the rows of dwte
// and dwpe updated.
func BenchEncoderBackward(b *testing.B, be backend.Backend, dt backend.DType, B, T, C, Vp int) {
	x := newBencher(b, be)
	dout, inp := x.buf(dt, B*T*C, 1), x.ints(B*T, Vp)
	dwte, dwpe := x.buf(dt, Vp*C, 0), x.buf(dt, T*C, 0)
	b.SetBytes(int64(3 * B * T * C * dt.Size()))
	x.run(0, func() { be.EncoderBackward(dwte, dwpe, dout, inp, B, T, C) })
}

// BenchCrossEntropyForward reports bytes/s over logits read and probs
// written (N·Vp each).
func BenchCrossEntropyForward(b *testing.B, be backend.Backend, dt backend.DType, N, V, Vp int) {
	x := newBencher(b, be)
	losses, probs := x.buf(backend.F32, N, 0), x.buf(backend.F32, N*Vp, 0)
	logits, targets := x.buf(dt, N*Vp, 2), x.ints(N, V)
	b.SetBytes(int64(N * Vp * (dt.Size() + 4)))
	x.run(0, func() { be.CrossEntropyForward(losses, probs, logits, targets, N, V, Vp) })
}

// BenchCrossEntropyBackward reports bytes/s over probs read and dlogits
// written.
func BenchCrossEntropyBackward(b *testing.B, be backend.Backend, dt backend.DType, N, V, Vp int) {
	x := newBencher(b, be)
	dlogits, probs, targets := x.buf(dt, N*Vp, 0), x.buf(backend.F32, N*Vp, 1), x.ints(N, V)
	b.SetBytes(int64(N * Vp * (dt.Size() + 4)))
	x.run(0, func() { be.CrossEntropyBackward(dlogits, probs, targets, 1/float32(N), N, V, Vp) })
}

// BenchAdamW reports bytes/s over param, grad, m, v (and master) read and
// written once per step.
func BenchAdamW(b *testing.B, be backend.Backend, param backend.DType, master bool, n int) {
	x := newBencher(b, be)
	p, g := x.buf(param, n, 0.02), x.buf(param, n, 0.01)
	m, v := x.buf(backend.F32, n, 0), x.buf(backend.F32, n, 0)
	var ms backend.Buffer
	bytes := 2*param.Size() + param.Size() + 2*4*2
	if master {
		ms = x.buf(backend.F32, n, 0.02)
		bytes += 2 * 4
	}
	b.SetBytes(int64(n * bytes))
	step := 0
	x.run(0, func() {
		step++
		be.AdamW(p, ms, g, m, v, backend.AdamWParams{LR: 1e-4, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, GradScale: 1, Step: step})
	})
}

// BenchSumSquares reports bytes/s over x read.
func BenchSumSquares(b *testing.B, be backend.Backend, dt backend.DType, n int) {
	x := newBencher(b, be)
	v := x.buf(dt, n, 1)
	b.SetBytes(int64(n * dt.Size()))
	x.run(0, func() { be.SumSquares(v) })
}
