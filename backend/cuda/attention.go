package cuda

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
)

// attentionDims panics unless the attention shapes agree: NH a positive
// multiple of KV, qkv (B,T,(NH+2·KV)·HD), out (B,T,NH·HD) and lse
// (B,NH,T) in F32.
func attentionDims(op string, out, lse, qkv backend.Buffer, B, T, NH, KV, HD int) {
	if B < 0 || T < 0 || NH <= 0 || KV <= 0 || HD <= 0 || NH%KV != 0 {
		panic("cuda: " + op + ": want B, T ≥ 0, positive NH, KV and HD, and NH a multiple of KV")
	}
	needLen(op, "qkv", qkv, B*T*(NH+2*KV)*HD)
	needLen(op, "out", out, B*T*NH*HD)
	needLen(op, "lse", lse, B*NH*T)
	if lse.DType() != backend.F32 {
		panic("cuda: " + op + ": lse must be F32")
	}
}

// AttentionForward implements backend.Backend with the kernel of
// attention.cu: one warp per query row, an online softmax over its keys
// and the weighted sum of values, without a round trip through cuBLAS and
// without a (T,T) buffer.
func (b *Backend) AttentionForward(out, lse, qkv backend.Buffer, B, T, NH, KV, HD int) {
	const op = "attention forward"
	if b.hostOp(op, out, lse, qkv) {
		b.host.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
		return
	}
	attentionDims(op, out, lse, qkv, B, T, NH, KV, HD)
	b.check(op, b.k.AttentionForward(b.stream, b.t(op, out), b.t(op, lse), b.t(op, qkv), B, T, NH, KV, HD))
}

// AttentionBackward implements backend.Backend in two kernels that
// recompute the probabilities from lse: per query row dq (and D =
// rowsum(dout∘out) into a (B,NH,T) workspace), then per key row dk and dv
// summed over the query heads of its group. Together they overwrite all of
// dqkv.
func (b *Backend) AttentionBackward(dqkv, dout, out, qkv, lse backend.Buffer, B, T, NH, KV, HD int) {
	const op = "attention backward"
	if b.hostOp(op, dqkv, dout, out, qkv, lse) {
		b.host.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
		return
	}
	attentionDims(op, out, lse, qkv, B, T, NH, KV, HD)
	needLen(op, "dout", dout, B*T*NH*HD)
	needLen(op, "dqkv", dqkv, B*T*(NH+2*KV)*HD)
	dd, release, ok := b.scratch(kernels.F32, B*NH*T)
	if !ok {
		return
	}
	defer release()
	dq, do, o, x, l := b.t(op, dqkv), b.t(op, dout), b.t(op, out), b.t(op, qkv), b.t(op, lse)
	if err := b.k.AttentionBackwardQuery(b.stream, dq, dd, do, o, x, l, B, T, NH, KV, HD); err != nil {
		b.check(op, err)
		return
	}
	b.check(op, b.k.AttentionBackwardKV(b.stream, dq, dd, do, x, l, B, T, NH, KV, HD))
}
