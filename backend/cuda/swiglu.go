package cuda

import "github.com/gotrain/gotrain/backend"

// SwiGLUForward implements backend.DecoderOps: one fused kernel reads each
// row's gate and up halves and writes silu(gate)·up.
func (b *Backend) SwiGLUForward(out, inp backend.Buffer, N, I int) {
	const op = "swiglu forward"
	if b.hostOp(op, out, inp) {
		if h, ok := b.hostDecoder(op); ok {
			h.SwiGLUForward(out, inp, N, I)
		}
		return
	}
	needLen(op, "out", out, N*I)
	needLen(op, "inp", inp, N*2*I)
	b.check(op, b.k.SwiGLUForward(b.stream, b.t(op, out), b.t(op, inp), N, I))
}

// SwiGLUBackward implements backend.DecoderOps in one kernel.
func (b *Backend) SwiGLUBackward(dinp, dout, inp backend.Buffer, N, I int) {
	const op = "swiglu backward"
	if b.hostOp(op, dinp, dout, inp) {
		if h, ok := b.hostDecoder(op); ok {
			h.SwiGLUBackward(dinp, dout, inp, N, I)
		}
		return
	}
	needLen(op, "dinp", dinp, N*2*I)
	needLen(op, "dout", dout, N*I)
	needLen(op, "inp", inp, N*2*I)
	b.check(op, b.k.SwiGLUBackward(b.stream, b.t(op, dinp), b.t(op, dout), b.t(op, inp), N, I))
}
