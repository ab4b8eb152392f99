package cuda

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
)

var (
	_ backend.DecoderOps = (*Backend)(nil)
	_ backend.Dropouter  = (*Backend)(nil)
)

// hostDecoder is the host backend's DecoderOps, for ops whose buffers all
// live in host pools; without them the op fails at the next Sync.
func (b *Backend) hostDecoder(op string) (backend.DecoderOps, bool) {
	d, ok := b.host.(backend.DecoderOps)
	if !ok {
		b.check(op, fmt.Errorf("the host backend %s lacks the Llama family's ops (backend.DecoderOps); "+
			"give Options.Host a CPU backend", b.host.Name()))
	}
	return d, ok
}

// RMSNormForward implements backend.DecoderOps: one warp per row, rstd
// saved as F32.
func (b *Backend) RMSNormForward(out, rstd, inp, weight backend.Buffer, N, C int, eps float32) {
	const op = "rmsnorm forward"
	if b.hostOp(op, out, rstd, inp, weight) {
		if h, ok := b.hostDecoder(op); ok {
			h.RMSNormForward(out, rstd, inp, weight, N, C, eps)
		}
		return
	}
	needLen(op, "out", out, N*C)
	needLen(op, "inp", inp, N*C)
	needLen(op, "rstd", rstd, N)
	needLen(op, "weight", weight, C)
	b.check(op, b.k.RMSNormForward(b.stream, b.t(op, out), b.t(op, rstd), b.t(op, inp), b.t(op, weight), N, C, eps))
}

// ResidualRMSNormForward implements backend.DecoderOps: the residual add
// and the RMSNorm after it in one kernel, bit-identical to Add followed by
// RMSNormForward.
func (b *Backend) ResidualRMSNormForward(residual, out, rstd, x, y, weight backend.Buffer, N, C int, eps float32) {
	const op = "residual rmsnorm forward"
	if b.hostOp(op, residual, out, rstd, x, y, weight) {
		if h, ok := b.hostDecoder(op); ok {
			h.ResidualRMSNormForward(residual, out, rstd, x, y, weight, N, C, eps)
		}
		return
	}
	for _, v := range []struct {
		name string
		buf  backend.Buffer
	}{{"residual", residual}, {"out", out}, {"a", x}, {"b", y}} {
		needLen(op, v.name, v.buf, N*C)
	}
	needLen(op, "rstd", rstd, N)
	needLen(op, "weight", weight, C)
	b.check(op, b.k.ResidualRMSNormForward(b.stream, b.t(op, residual), b.t(op, out), b.t(op, rstd),
		b.t(op, x), b.t(op, y), b.t(op, weight), N, C, eps))
}

// RMSNormBackward implements backend.DecoderOps: dweight accumulates
// column sums computed as per-chunk partials in device scratch, then
// added in chunk order (deterministic, no float atomics); dinp is one warp
// per row. The partials are taken first, so dinp may alias dout or inp.
// A zero dweight (a frozen norm) skips them.
func (b *Backend) RMSNormBackward(dinp, dweight, dout, inp, weight, rstd backend.Buffer, N, C int) {
	const op = "rmsnorm backward"
	if b.hostOp(op, dinp, dweight, dout, inp, weight, rstd) {
		if h, ok := b.hostDecoder(op); ok {
			h.RMSNormBackward(dinp, dweight, dout, inp, weight, rstd, N, C)
		}
		return
	}
	needLen(op, "dinp", dinp, N*C)
	needLen(op, "dout", dout, N*C)
	needLen(op, "inp", inp, N*C)
	needLen(op, "weight", weight, C)
	needLen(op, "rstd", rstd, N)
	d, x, r := b.t(op, dout), b.t(op, inp), b.t(op, rstd)
	if !dweight.IsNil() { // zero for a frozen norm
		needLen(op, "dweight", dweight, C)
		partial, release, ok := b.scratch(kernels.F32, kernels.RMSNormPartialLen(N, C))
		if !ok {
			return
		}
		defer release()
		b.check(op, b.k.RMSNormBackwardPartial(b.stream, partial, d, x, r, N, C))
		b.check(op, b.k.MatmulDbiasReduce(b.stream, b.t(op, dweight), partial, N, C))
	}
	b.check(op, b.k.RMSNormBackwardDinp(b.stream, b.t(op, dinp), d, x, b.t(op, weight), r, N, C))
}
