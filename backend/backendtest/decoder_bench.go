package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// Benchmark helpers for backend.DecoderOps. These ops are memory-bound; each
// helper states the bytes one call must move at least (every operand read
// once, every result written once; the F32 statistics, the norm weights
// and the cos/sin tables are small and not counted) and reports them per
// second as GB/s, and as MB/s through b.SetBytes. Activations and parameters
// are stored in dt.

// runBytes times op and reports bytes per call as GB/s.
func (x *bencher) runBytes(bytes int, op func()) {
	x.b.Helper()
	x.b.SetBytes(int64(bytes))
	x.run(0, op)
	x.b.ReportMetric(float64(bytes)*float64(x.b.N)/x.b.Elapsed().Seconds()/1e9, "GB/s")
}

// decoderOps fails the benchmark unless be implements backend.DecoderOps.
func decoderOps(b *testing.B, be backend.Backend) backend.DecoderOps {
	ops, ok := be.(backend.DecoderOps)
	if !ok {
		b.Fatalf("%s does not implement backend.DecoderOps", be.Name())
	}
	return ops
}

// BenchRMSNormForward reports bytes/s over inp read and out written.
func BenchRMSNormForward(b *testing.B, be backend.Backend, dt backend.DType, N, C int) {
	ops, x := decoderOps(b, be), newBencher(b, be)
	out, rstd, inp, w := x.buf(dt, N*C, 0), x.buf(backend.F32, N, 0), x.buf(dt, N*C, 1), x.buf(dt, C, 1)
	x.runBytes(2*N*C*dt.Size(), func() { ops.RMSNormForward(out, rstd, inp, w, N, C, 1e-6) })
}

// BenchRMSNormBackward reports bytes/s over dout and inp read and dinp
// written.
func BenchRMSNormBackward(b *testing.B, be backend.Backend, dt backend.DType, N, C int) {
	ops, x := decoderOps(b, be), newBencher(b, be)
	out, rstd, inp, w := x.buf(dt, N*C, 0), x.buf(backend.F32, N, 0), x.buf(dt, N*C, 1), x.buf(dt, C, 1)
	ops.RMSNormForward(out, rstd, inp, w, N, C, 1e-6)
	dinp, dw, dout := x.buf(dt, N*C, 0), x.buf(dt, C, 0), x.buf(dt, N*C, 1)
	x.runBytes(3*N*C*dt.Size(), func() { ops.RMSNormBackward(dinp, dw, dout, inp, w, rstd, N, C) })
}

// BenchResidualRMSNormForward reports bytes/s over a and b read and
// residual and out written (residual separate from a and b).
func BenchResidualRMSNormForward(b *testing.B, be backend.Backend, dt backend.DType, N, C int) {
	ops, x := decoderOps(b, be), newBencher(b, be)
	res, out, rstd := x.buf(dt, N*C, 0), x.buf(dt, N*C, 0), x.buf(backend.F32, N, 0)
	p, q, w := x.buf(dt, N*C, 1), x.buf(dt, N*C, 1), x.buf(dt, C, 1)
	x.runBytes(4*N*C*dt.Size(), func() { ops.ResidualRMSNormForward(res, out, rstd, p, q, w, N, C, 1e-6) })
}

// rotaryOperands allocates qkv and, with qkNorm, Qwen3's norm weights and
// rstd, plus the cos/sin tables of θ = 10000.
func rotaryOperands(x *bencher, dt backend.DType, qkNorm bool, B, T, NH, KV, HD int) (qkv, qn, kn, rstd, cos, sin backend.Buffer) {
	qkv = x.buf(dt, B*T*(NH+2*KV)*HD, 1)
	if qkNorm {
		qn, kn, rstd = x.buf(dt, HD, 1), x.buf(dt, HD, 1), x.buf(backend.F32, B*T*(NH+KV), 0)
	}
	cv, sv := RefRotaryTable(T, HD, RefRopeInvFreq(HD, 10000))
	cos, sin = x.buf(backend.F32, T*HD/2, 0), x.buf(backend.F32, T*HD/2, 0)
	for _, p := range []struct {
		buf  backend.Buffer
		vals []float64
	}{{cos, cv}, {sin, sv}} {
		f := make([]float32, len(p.vals))
		for i, v := range p.vals {
			f[i] = float32(v)
		}
		if err := backend.WriteF32(x.be, p.buf, f); err != nil {
			x.b.Fatal(err)
		}
	}
	return qkv, qn, kn, rstd, cos, sin
}

// BenchQKVRotaryForward reports bytes/s over qkv read and out written, with
// or without Qwen3's per-head norms.
func BenchQKVRotaryForward(b *testing.B, be backend.Backend, dt backend.DType, qkNorm bool, B, T, NH, KV, HD int) {
	ops, x := decoderOps(b, be), newBencher(b, be)
	qkv, qn, kn, rstd, cos, sin := rotaryOperands(x, dt, qkNorm, B, T, NH, KV, HD)
	n := B * T * (NH + 2*KV) * HD
	out := x.buf(dt, n, 0)
	x.runBytes(2*n*dt.Size(), func() { ops.QKVRotaryForward(out, rstd, qkv, qn, kn, cos, sin, B, T, NH, KV, HD, 1e-6) })
}

// BenchQKVRotaryBackward reports bytes/s over dout read and dqkv written,
// plus qkv read with the norms.
func BenchQKVRotaryBackward(b *testing.B, be backend.Backend, dt backend.DType, qkNorm bool, B, T, NH, KV, HD int) {
	ops, x := decoderOps(b, be), newBencher(b, be)
	qkv, qn, kn, rstd, cos, sin := rotaryOperands(x, dt, qkNorm, B, T, NH, KV, HD)
	n := B * T * (NH + 2*KV) * HD
	out := x.buf(dt, n, 0)
	ops.QKVRotaryForward(out, rstd, qkv, qn, kn, cos, sin, B, T, NH, KV, HD, 1e-6)
	dqkv, dout := x.buf(dt, n, 0), x.buf(dt, n, 1)
	var dqn, dkn backend.Buffer
	bytes := 2 * n * dt.Size()
	if qkNorm {
		dqn, dkn = x.buf(dt, HD, 0), x.buf(dt, HD, 0)
		bytes += n * dt.Size()
	}
	x.runBytes(bytes, func() {
		ops.QKVRotaryBackward(dqkv, dqn, dkn, dout, qkv, qn, kn, rstd, cos, sin, B, T, NH, KV, HD)
	})
}

// BenchSwiGLUForward reports bytes/s over inp (N, 2I) read and out (N, I)
// written.
func BenchSwiGLUForward(b *testing.B, be backend.Backend, dt backend.DType, N, I int) {
	ops, x := decoderOps(b, be), newBencher(b, be)
	out, inp := x.buf(dt, N*I, 0), x.buf(dt, N*2*I, 2)
	x.runBytes(3*N*I*dt.Size(), func() { ops.SwiGLUForward(out, inp, N, I) })
}

// BenchSwiGLUBackward reports bytes/s over inp (N, 2I) and dout (N, I) read
// and dinp (N, 2I) written.
func BenchSwiGLUBackward(b *testing.B, be backend.Backend, dt backend.DType, N, I int) {
	ops, x := decoderOps(b, be), newBencher(b, be)
	dinp, dout, inp := x.buf(dt, N*2*I, 0), x.buf(dt, N*I, 1), x.buf(dt, N*2*I, 2)
	x.runBytes(5*N*I*dt.Size(), func() { ops.SwiGLUBackward(dinp, dout, inp, N, I) })
}
