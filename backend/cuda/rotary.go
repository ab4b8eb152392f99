package cuda

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
)

// rotaryShape panics on a shape the rotary ops cannot run (as the CPU
// backend does): an odd head size, norms given in part, wrong lengths. It
// returns whether the norms are given.
func rotaryShape(op string, rstd, qnorm, knorm, cos, sin, qkv backend.Buffer, B, T, NH, KV, HD int) bool {
	if HD%2 != 0 {
		panic("cuda: " + op + ": head size HD must be even")
	}
	norms := !qnorm.IsNil()
	if knorm.IsNil() == norms || rstd.IsNil() == norms {
		panic("cuda: " + op + ": qnorm, knorm and rstd must be given together or not at all")
	}
	needLen(op, "qkv", qkv, B*T*(NH+2*KV)*HD)
	needLen(op, "cos", cos, T*HD/2)
	needLen(op, "sin", sin, T*HD/2)
	if norms {
		needLen(op, "qnorm", qnorm, HD)
		needLen(op, "knorm", knorm, HD)
		needLen(op, "rstd", rstd, B*T*(NH+KV))
	}
	return norms
}

// opt is x as a kernel argument, or the zero Tensor (a null pointer the
// kernels test for) when x is the zero Buffer.
func (b *Backend) opt(op string, x backend.Buffer) kernels.Tensor {
	if x.IsNil() {
		return kernels.Tensor{}
	}
	return b.t(op, x)
}

// QKVRotaryForward implements backend.DecoderOps in one kernel: a warp per
// head of a token normalises it (with the norms), rotates it, or copies
// it (value heads), so qkv is read once.
func (b *Backend) QKVRotaryForward(out, rstd, qkv, qnorm, knorm, cos, sin backend.Buffer, B, T, NH, KV, HD int, eps float32) {
	const op = "qkv rotary forward"
	if b.hostOp(op, out, rstd, qkv, qnorm, knorm, cos, sin) {
		if h, ok := b.hostDecoder(op); ok {
			h.QKVRotaryForward(out, rstd, qkv, qnorm, knorm, cos, sin, B, T, NH, KV, HD, eps)
		}
		return
	}
	rotaryShape(op, rstd, qnorm, knorm, cos, sin, qkv, B, T, NH, KV, HD)
	needLen(op, "out", out, qkv.Len())
	b.check(op, b.k.RotaryForward(b.stream, b.t(op, out), b.opt(op, rstd), b.t(op, qkv), b.opt(op, qnorm),
		b.opt(op, knorm), b.t(op, cos), b.t(op, sin), B, T, NH, KV, HD, eps))
}

// QKVRotaryBackward implements backend.DecoderOps: with the norms, their
// gradients are per-chunk partial sums over tokens in device scratch,
// added in chunk order (deterministic, no float atomics), taken before
// dqkv is written, so dqkv may alias dout in every case.
func (b *Backend) QKVRotaryBackward(dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin backend.Buffer, B, T, NH, KV, HD int) {
	const op = "qkv rotary backward"
	if b.hostOp(op, dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin) {
		if h, ok := b.hostDecoder(op); ok {
			h.QKVRotaryBackward(dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin, B, T, NH, KV, HD)
		}
		return
	}
	norms := rotaryShape(op, rstd, qnorm, knorm, cos, sin, qkv, B, T, NH, KV, HD)
	if dqnorm.IsNil() != dknorm.IsNil() || (!norms && !dqnorm.IsNil()) {
		panic("cuda: " + op + ": dqnorm and dknorm go together, and only with the norms")
	}
	needLen(op, "dqkv", dqkv, qkv.Len())
	needLen(op, "dout", dout, qkv.Len())
	d, x, c, s := b.t(op, dout), b.t(op, qkv), b.t(op, cos), b.t(op, sin)
	if !dqnorm.IsNil() && B*T > 0 && HD > 0 { // zero for frozen norms
		needLen(op, "dqnorm", dqnorm, HD)
		needLen(op, "dknorm", dknorm, HD)
		n := kernels.RotaryPartialLen(B*T, HD)
		partial, release, ok := b.scratch(kernels.F32, n)
		if !ok {
			return
		}
		defer release()
		second := kernels.Tensor{Ptr: partial.Ptr.Add(4 * n / 2), DT: kernels.F32}
		r := b.t(op, rstd)
		b.check(op, b.k.RotaryBackwardPartial(b.stream, partial, d, x, r, c, s, B, T, NH, KV, HD))
		b.check(op, b.k.MatmulDbiasReduce(b.stream, b.t(op, dqnorm), partial, B*T, HD))
		b.check(op, b.k.MatmulDbiasReduce(b.stream, b.t(op, dknorm), second, B*T, HD))
	}
	b.check(op, b.k.RotaryBackward(b.stream, b.t(op, dqkv), d, x, b.opt(op, qnorm), b.opt(op, knorm),
		b.opt(op, rstd), c, s, B, T, NH, KV, HD))
}
