package cuda

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
)

// LayerNormForward implements backend.Backend: one warp per row, mean and
// rstd saved as F32.
func (b *Backend) LayerNormForward(out, mean, rstd, inp, weight, bias backend.Buffer, N, C int) {
	const op = "layernorm forward"
	if b.hostOp(op, out, mean, rstd, inp, weight, bias) {
		b.host.LayerNormForward(out, mean, rstd, inp, weight, bias, N, C)
		return
	}
	needLen(op, "out", out, N*C)
	needLen(op, "inp", inp, N*C)
	needLen(op, "mean", mean, N)
	needLen(op, "rstd", rstd, N)
	needLen(op, "weight", weight, C)
	needLen(op, "bias", bias, C)
	b.check(op, b.k.LayerNormForward(b.stream, b.t(op, out), b.t(op, mean), b.t(op, rstd), b.t(op, inp),
		b.t(op, weight), b.t(op, bias), N, C))
}

// ResidualLayerNormForward implements backend.ResidualLayerNormer: the
// residual add and the LayerNorm after it in one kernel, bit-identical to
// Add followed by LayerNormForward.
func (b *Backend) ResidualLayerNormForward(residual, out, mean, rstd, x, y, weight, bias backend.Buffer, N, C int) {
	const op = "residual layernorm forward"
	if b.hostOp(op, residual, out, mean, rstd, x, y, weight, bias) {
		b.host.Add(residual, x, y, N*C)
		b.host.LayerNormForward(out, mean, rstd, residual, weight, bias, N, C)
		return
	}
	for _, v := range []struct {
		name string
		buf  backend.Buffer
	}{{"residual", residual}, {"out", out}, {"a", x}, {"b", y}} {
		needLen(op, v.name, v.buf, N*C)
	}
	needLen(op, "mean", mean, N)
	needLen(op, "rstd", rstd, N)
	needLen(op, "weight", weight, C)
	needLen(op, "bias", bias, C)
	b.check(op, b.k.ResidualLayerNormForward(b.stream, b.t(op, residual), b.t(op, out), b.t(op, mean), b.t(op, rstd),
		b.t(op, x), b.t(op, y), b.t(op, weight), b.t(op, bias), N, C))
}

// LayerNormBackward implements backend.Backend: dinp one warp per row;
// dweight and dbias accumulate column sums computed as per-chunk partials
// in device scratch and then added in chunk order (deterministic, no
// float atomics); zero dweight and dbias (a frozen norm) skip them.
func (b *Backend) LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd backend.Buffer, N, C int) {
	const op = "layernorm backward"
	if b.hostOp(op, dinp, dweight, dbias, dout, inp, weight, mean, rstd) {
		b.host.LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
		return
	}
	needLen(op, "dinp", dinp, N*C)
	needLen(op, "dout", dout, N*C)
	needLen(op, "inp", inp, N*C)
	needLen(op, "weight", weight, C)
	needLen(op, "mean", mean, N)
	needLen(op, "rstd", rstd, N)
	d, x, m, r := b.t(op, dout), b.t(op, inp), b.t(op, mean), b.t(op, rstd)
	b.check(op, b.k.LayerNormBackwardDinp(b.stream, b.t(op, dinp), d, x, b.t(op, weight), m, r, N, C))
	if dweight.IsNil() && dbias.IsNil() { // a frozen norm
		return
	}
	needLen(op, "dweight", dweight, C)
	needLen(op, "dbias", dbias, C)
	partial, release, ok := b.scratch(kernels.F32, kernels.LayerNormPartialLen(N, C))
	if !ok {
		return
	}
	defer release()
	b.check(op, b.k.LayerNormBackwardPartial(b.stream, partial, d, x, m, r, N, C))
	b.check(op, b.k.LayerNormBackwardReduce(b.stream, b.t(op, dweight), b.t(op, dbias), partial, N, C))
}
