package cuda

import "github.com/gotrain/gotrain/backend"

// attentionDims panics unless the attention shapes agree: C a positive
// multiple of NH, qkv (B,T,3C), out or dout (B,T,C), att-sized buffers
// (B,NH,T,T) in F32.
func attentionDims(op string, x, qkv backend.Buffer, atts []backend.Buffer, B, T, C, NH int) {
	if B < 0 || T < 0 || C <= 0 || NH <= 0 || C%NH != 0 {
		panic("cuda: " + op + ": C must be a positive multiple of NH")
	}
	needLen(op, "qkv", qkv, B*T*3*C)
	needLen(op, "out", x, B*T*C)
	for _, a := range atts {
		needLen(op, "att", a, B*NH*T*T)
		if a.DType() != backend.F32 {
			panic("cuda: " + op + ": att and datt must be F32")
		}
	}
}

// AttentionForward implements backend.Backend with the kernels of
// attention.cu: one warp per query row, scores, softmax and the weighted
// sum of values without a round trip through cuBLAS.
func (b *Backend) AttentionForward(out, att, qkv backend.Buffer, B, T, C, NH int) {
	const op = "attention forward"
	if b.hostOp(op, out, att, qkv) {
		b.host.AttentionForward(out, att, qkv, B, T, C, NH)
		return
	}
	attentionDims(op, out, qkv, []backend.Buffer{att}, B, T, C, NH)
	b.check(op, b.k.AttentionForward(b.stream, b.t(op, out), b.t(op, att), b.t(op, qkv), B, T, C, NH))
}

// AttentionBackward implements backend.Backend in two kernels: per query
// row the score gradients (into datt) and dq, then per key row dk and dv
// from the finished datt. Together they overwrite all of dqkv.
func (b *Backend) AttentionBackward(dqkv, datt, dout, qkv, att backend.Buffer, B, T, C, NH int) {
	const op = "attention backward"
	if b.hostOp(op, dqkv, datt, dout, qkv, att) {
		b.host.AttentionBackward(dqkv, datt, dout, qkv, att, B, T, C, NH)
		return
	}
	attentionDims(op, dout, qkv, []backend.Buffer{datt, att}, B, T, C, NH)
	needLen(op, "dqkv", dqkv, B*T*3*C)
	dq, da, do, x, a := b.t(op, dqkv), b.t(op, datt), b.t(op, dout), b.t(op, qkv), b.t(op, att)
	if err := b.k.AttentionBackwardQuery(b.stream, dq, da, do, x, a, B, T, C, NH); err != nil {
		b.check(op, err)
		return
	}
	b.check(op, b.k.AttentionBackwardKV(b.stream, dq, da, do, x, a, B, T, C, NH))
}
