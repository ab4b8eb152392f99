package meta

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// buf is one buffer argument with the length the op's dimensions demand
// (want < 0: any length) and whether it is optional (the zero Buffer is
// allowed and skipped).
type buf struct {
	name     string
	b        backend.Buffer
	want     int
	write    bool
	optional bool
}

func in(name string, b backend.Buffer, want int) buf { return buf{name: name, b: b, want: want} }
func out(name string, b backend.Buffer, want int) buf {
	return buf{name: name, b: b, want: want, write: true}
}
func opt(b buf) buf { b.optional = true; return b }
func anyLen(name string, b backend.Buffer, w bool) buf {
	return buf{name: name, b: b, want: -1, write: w}
}

// call checks every buffer of op as the real backends do (a wrong length,
// a freed buffer or a missing one is a bug in the caller and panics) and
// records the call.
func (be *Backend) call(op string, d []Dim, bufs ...buf) {
	args := make([]Arg, 0, len(bufs))
	for _, x := range bufs {
		if x.b.IsNil() {
			if x.optional {
				continue
			}
			panic(fmt.Sprintf("meta: %s: %s is the zero Buffer", op, x.name))
		}
		be.use(op, x.b)
		if x.want >= 0 && x.b.Len() != x.want {
			panic(fmt.Sprintf("meta: %s: %s has %d elements, want %d", op, x.name, x.b.Len(), x.want))
		}
		args = append(args, arg(x.name, x.b, x.write))
	}
	be.record(op, d, args...)
}

// Copy implements backend.Backend.
func (be *Backend) Copy(dst, src backend.Buffer) {
	if dst.DType() != src.DType() && (!dst.DType().IsFloat() || !src.DType().IsFloat()) {
		panic("meta: Copy: cannot cast " + src.DType().String() + " to " + dst.DType().String())
	}
	be.call("Copy", nil, out("dst", dst, src.Len()), in("src", src, -1))
}

// Zero implements backend.Backend.
func (be *Backend) Zero(dst backend.Buffer) { be.call("Zero", nil, anyLen("dst", dst, true)) }

// EncoderForward implements backend.Backend.
func (be *Backend) EncoderForward(outp, inp, wte, wpe backend.Buffer, B, T, C int) {
	be.call("EncoderForward", dims("B", B, "T", T, "C", C),
		out("out", outp, B*T*C), in("inp", inp, B*T), anyLen("wte", wte, false), opt(anyLen("wpe", wpe, false)))
}

// EncoderBackward implements backend.Backend.
func (be *Backend) EncoderBackward(dwte, dwpe, dout, inp backend.Buffer, B, T, C int) {
	be.call("EncoderBackward", dims("B", B, "T", T, "C", C),
		opt(anyLen("dwte", dwte, true)), opt(anyLen("dwpe", dwpe, true)), in("dout", dout, B*T*C), in("inp", inp, B*T))
}

// LayerNormForward implements backend.Backend.
func (be *Backend) LayerNormForward(outp, mean, rstd, inp, weight, bias backend.Buffer, N, C int) {
	be.call("LayerNormForward", dims("N", N, "C", C), out("out", outp, N*C), out("mean", mean, N), out("rstd", rstd, N),
		in("inp", inp, N*C), in("weight", weight, C), in("bias", bias, C))
}

// LayerNormBackward implements backend.Backend.
func (be *Backend) LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd backend.Buffer, N, C int) {
	be.call("LayerNormBackward", dims("N", N, "C", C), out("dinp", dinp, N*C), opt(out("dweight", dweight, C)), opt(out("dbias", dbias, C)),
		in("dout", dout, N*C), in("inp", inp, N*C), in("weight", weight, C), in("mean", mean, N), in("rstd", rstd, N))
}

// ResidualLayerNormForward implements backend.ResidualLayerNormer.
func (be *Backend) ResidualLayerNormForward(residual, outp, mean, rstd, a, b, weight, bias backend.Buffer, N, C int) {
	be.call("ResidualLayerNormForward", dims("N", N, "C", C), out("residual", residual, N*C), out("out", outp, N*C),
		out("mean", mean, N), out("rstd", rstd, N), in("a", a, N*C), in("b", b, N*C), in("weight", weight, C), in("bias", bias, C))
}

// MatmulForward implements backend.Backend.
func (be *Backend) MatmulForward(outp, inp, weight, bias backend.Buffer, N, C, OC int) {
	be.call("MatmulForward", dims("N", N, "C", C, "OC", OC), out("out", outp, N*OC), in("inp", inp, N*C),
		in("weight", weight, OC*C), opt(in("bias", bias, OC)))
}

// MatmulBackward implements backend.Backend.
func (be *Backend) MatmulBackward(dinp, dweight, dbias, dout, inp, weight backend.Buffer, N, C, OC int) {
	be.call("MatmulBackward", dims("N", N, "C", C, "OC", OC), opt(out("dinp", dinp, N*C)), opt(out("dweight", dweight, OC*C)),
		opt(out("dbias", dbias, OC)), in("dout", dout, N*OC), in("inp", inp, N*C), in("weight", weight, OC*C))
}

// AttentionForward implements backend.Backend.
func (be *Backend) AttentionForward(outp, lse, qkv backend.Buffer, B, T, NH, KV, HD int) {
	checkHeads(NH, KV)
	be.call("AttentionForward", dims("B", B, "T", T, "NH", NH, "KV", KV, "HD", HD), out("out", outp, B*T*NH*HD),
		out("lse", lse, B*NH*T), in("qkv", qkv, B*T*(NH+2*KV)*HD))
}

// AttentionBackward implements backend.Backend.
func (be *Backend) AttentionBackward(dqkv, dout, outp, qkv, lse backend.Buffer, B, T, NH, KV, HD int) {
	checkHeads(NH, KV)
	be.call("AttentionBackward", dims("B", B, "T", T, "NH", NH, "KV", KV, "HD", HD), out("dqkv", dqkv, B*T*(NH+2*KV)*HD),
		in("dout", dout, B*T*NH*HD), in("out", outp, B*T*NH*HD), in("qkv", qkv, B*T*(NH+2*KV)*HD), in("lse", lse, B*NH*T))
}

// checkHeads panics unless the query heads are a multiple of the
// key/value heads, as the real backends do.
func checkHeads(NH, KV int) {
	if KV < 1 || NH%KV != 0 {
		panic(fmt.Sprintf("meta: attention: %d query heads are not a multiple of %d key/value heads", NH, KV))
	}
}

// GeluForward implements backend.Backend.
func (be *Backend) GeluForward(outp, inp backend.Buffer, N int) {
	be.call("GeluForward", dims("N", N), out("out", outp, N), in("inp", inp, N))
}

// GeluBackward implements backend.Backend.
func (be *Backend) GeluBackward(dinp, inp, dout backend.Buffer, N int) {
	be.call("GeluBackward", dims("N", N), out("dinp", dinp, N), in("inp", inp, N), in("dout", dout, N))
}

// Add implements backend.Backend.
func (be *Backend) Add(outp, a, b backend.Buffer, N int) {
	be.call("Add", dims("N", N), out("out", outp, N), in("a", a, N), in("b", b, N))
}

// Scale implements backend.Backend.
func (be *Backend) Scale(x backend.Buffer, s float32) { be.call("Scale", nil, anyLen("x", x, true)) }

// Dropout implements backend.Dropouter.
func (be *Backend) Dropout(outp, inp backend.Buffer, p float32, seed uint64, N int) {
	be.call("Dropout", dims("N", N), out("out", outp, N), in("inp", inp, N))
}

// CrossEntropyForward implements backend.Backend.
func (be *Backend) CrossEntropyForward(losses, probs, logits, targets backend.Buffer, N, V, Vp int) {
	be.call("CrossEntropyForward", dims("N", N, "V", V, "Vp", Vp), out("losses", losses, N), out("probs", probs, N*Vp),
		in("logits", logits, N*Vp), in("targets", targets, N))
}

// CrossEntropyBackward implements backend.Backend.
func (be *Backend) CrossEntropyBackward(dlogits, probs, targets backend.Buffer, dloss float32, N, V, Vp int) {
	be.call("CrossEntropyBackward", dims("N", N, "V", V, "Vp", Vp), out("dlogits", dlogits, N*Vp), in("probs", probs, N*Vp),
		in("targets", targets, N))
}

// FusedClassifier implements backend.Backend.
func (be *Backend) FusedClassifier(losses, logits, targets backend.Buffer, dloss float32, N, V, Vp int) {
	write := 0 // dims say whether dlogits are written: the cost model prices the second pass
	if dloss != 0 {
		write = 1
	}
	be.call("FusedClassifier", dims("N", N, "V", V, "Vp", Vp, "dlogits", write), out("losses", losses, N), out("logits", logits, N*Vp),
		in("targets", targets, N))
}

// AddSum implements backend.Backend.
func (be *Backend) AddSum(acc, x backend.Buffer) {
	if acc.DType() != backend.F32 || x.DType() != backend.F32 {
		panic("meta: AddSum: acc and x must be F32")
	}
	be.call("AddSum", dims("N", x.Len()), out("acc", acc, 1), in("x", x, x.Len()))
}

// AdamW implements backend.Backend.
func (be *Backend) AdamW(param, master, grad, m, v backend.Buffer, p backend.AdamWParams) {
	if p.Step < 1 {
		panic("meta: AdamW: Step must be ≥ 1")
	}
	n := param.Len()
	be.call("AdamW", dims("N", n), out("param", param, n), opt(out("master", master, n)), in("grad", grad, n),
		out("m", m, n), out("v", v, n))
}

// SumSquares implements backend.Backend: 0.
func (be *Backend) SumSquares(x backend.Buffer) float64 {
	be.call("SumSquares", dims("N", x.Len()), anyLen("x", x, false))
	return 0
}

// NonFinite implements backend.Backend: false.
func (be *Backend) NonFinite(x backend.Buffer) bool {
	be.call("NonFinite", dims("N", x.Len()), anyLen("x", x, false))
	return false
}

// RMSNormForward implements backend.DecoderOps.
func (be *Backend) RMSNormForward(outp, rstd, inp, weight backend.Buffer, N, C int, eps float32) {
	be.call("RMSNormForward", dims("N", N, "C", C), out("out", outp, N*C), out("rstd", rstd, N), in("inp", inp, N*C), in("weight", weight, C))
}

// RMSNormBackward implements backend.DecoderOps.
func (be *Backend) RMSNormBackward(dinp, dweight, dout, inp, weight, rstd backend.Buffer, N, C int) {
	be.call("RMSNormBackward", dims("N", N, "C", C), out("dinp", dinp, N*C), opt(out("dweight", dweight, C)), in("dout", dout, N*C),
		in("inp", inp, N*C), in("weight", weight, C), in("rstd", rstd, N))
}

// ResidualRMSNormForward implements backend.DecoderOps.
func (be *Backend) ResidualRMSNormForward(residual, outp, rstd, a, b, weight backend.Buffer, N, C int, eps float32) {
	be.call("ResidualRMSNormForward", dims("N", N, "C", C), out("residual", residual, N*C), out("out", outp, N*C),
		out("rstd", rstd, N), in("a", a, N*C), in("b", b, N*C), in("weight", weight, C))
}

// QKVRotaryForward implements backend.DecoderOps.
func (be *Backend) QKVRotaryForward(outp, rstd, qkv, qnorm, knorm, cos, sin backend.Buffer, B, T, NH, KV, HD int, eps float32) {
	W := (NH + 2*KV) * HD
	be.call("QKVRotaryForward", dims("B", B, "T", T, "NH", NH, "KV", KV, "HD", HD), out("out", outp, B*T*W),
		opt(out("rstd", rstd, B*T*(NH+KV))), in("qkv", qkv, B*T*W), opt(in("qnorm", qnorm, HD)), opt(in("knorm", knorm, HD)),
		in("cos", cos, T*HD/2), in("sin", sin, T*HD/2))
}

// QKVRotaryBackward implements backend.DecoderOps.
func (be *Backend) QKVRotaryBackward(dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin backend.Buffer, B, T, NH, KV, HD int) {
	W := (NH + 2*KV) * HD
	be.call("QKVRotaryBackward", dims("B", B, "T", T, "NH", NH, "KV", KV, "HD", HD), out("dqkv", dqkv, B*T*W),
		opt(out("dqnorm", dqnorm, HD)), opt(out("dknorm", dknorm, HD)), in("dout", dout, B*T*W), in("qkv", qkv, B*T*W),
		opt(in("qnorm", qnorm, HD)), opt(in("knorm", knorm, HD)), opt(in("rstd", rstd, B*T*(NH+KV))),
		in("cos", cos, T*HD/2), in("sin", sin, T*HD/2))
}

// SwiGLUForward implements backend.DecoderOps.
func (be *Backend) SwiGLUForward(outp, inp backend.Buffer, N, I int) {
	be.call("SwiGLUForward", dims("N", N, "I", I), out("out", outp, N*I), in("inp", inp, N*2*I))
}

// SwiGLUBackward implements backend.DecoderOps.
func (be *Backend) SwiGLUBackward(dinp, dout, inp backend.Buffer, N, I int) {
	be.call("SwiGLUBackward", dims("N", N, "I", I), out("dinp", dinp, N*2*I), in("dout", dout, N*I), in("inp", inp, N*2*I))
}
