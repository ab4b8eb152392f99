package compare

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// decoderDims are the Llama-family sizes the decoder ops run at for shape s:
// HD is the head size C/NH rounded down to even (rotary pairs), KV = NH/2
// key/value heads when NH is even, else 1 (multi-query), and I ≈ 8C/3 made
// odd, SwiGLU's intermediate size.
func decoderDims(s Shape) (HD, KV, I int) {
	HD = 2 * max(1, s.C/s.NH/2)
	KV = 1
	if s.NH%2 == 0 {
		KV = s.NH / 2
	}
	return HD, KV, 8*s.C/3 | 1
}

// decoderOps runs the Llama family's ops (backend.DecoderOps) when both
// backends have them; a backend without them is not compared on them (the
// CUDA backend until its kernels land).
func (p *pair) decoderOps(s Shape, d DTypes) {
	g, gok := p.g.(backend.DecoderOps)
	c, cok := p.c.(backend.DecoderOps)
	if !gok || !cok {
		return
	}
	B, T, C, NH := s.B, s.T, s.C, s.NH
	HD, KV, I := decoderDims(s)
	N := B * T
	act, par := d.Act, d.Param
	const eps = 1e-6

	// RMSNorm and the fused residual add + RMSNorm.
	x, w := p.normal(act, N*C, 1), p.normal(par, C, 1)
	out, rstd := p.output(act, N*C), p.output(backend.F32, N)
	g.RMSNormForward(out.g, rstd.g, x.g, w.g, N, C, eps)
	c.RMSNormForward(out.c, rstd.c, x.c, w.c, N, C, eps)
	p.same("rmsnorm out", out)
	p.same("rmsnorm rstd", rstd)
	dout, dinp, dw := p.normal(act, N*C, 1), p.output(act, N*C), p.normal(par, C, 0.1)
	g.RMSNormBackward(dinp.g, dw.g, dout.g, x.g, w.g, rstd.g, N, C)
	c.RMSNormBackward(dinp.c, dw.c, dout.c, x.c, w.c, rstd.c, N, C)
	p.same("rmsnorm dinp", dinp)
	p.same("rmsnorm dweight", dw)
	res := p.output(act, N*C)
	g.ResidualRMSNormForward(res.g, out.g, rstd.g, x.g, dout.g, w.g, N, C, eps)
	c.ResidualRMSNormForward(res.c, out.c, rstd.c, x.c, dout.c, w.c, N, C, eps)
	p.same("residual+rmsnorm residual", res)
	p.same("residual+rmsnorm out", out)
	p.same("residual+rmsnorm rstd", rstd)

	// The QKV rotary without and with Qwen3's per-head norms, θ = 10000.
	n := N * (NH + 2*KV) * HD
	cos, sin := p.alloc(backend.F32, T*HD/2), p.output(backend.F32, T*HD/2)
	cv, sv := make([]float32, T*HD/2), make([]float32, T*HD/2)
	for t := 0; t < T; t++ {
		for j := 0; j < HD/2; j++ {
			a := float64(t) / math.Pow(10000, float64(2*j)/float64(HD))
			cv[t*HD/2+j], sv[t*HD/2+j] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	p.set(cos, cv)
	p.set(sin, sv)
	qkv, ro := p.normal(act, n, 1), p.output(act, n)
	var none backend.Buffer
	g.QKVRotaryForward(ro.g, none, qkv.g, none, none, cos.g, sin.g, B, T, NH, KV, HD, 0)
	c.QKVRotaryForward(ro.c, none, qkv.c, none, none, cos.c, sin.c, B, T, NH, KV, HD, 0)
	p.same("rotary out", ro)
	dro, dqkv := p.normal(act, n, 1), p.output(act, n)
	g.QKVRotaryBackward(dqkv.g, none, none, dro.g, qkv.g, none, none, none, cos.g, sin.g, B, T, NH, KV, HD)
	c.QKVRotaryBackward(dqkv.c, none, none, dro.c, qkv.c, none, none, none, cos.c, sin.c, B, T, NH, KV, HD)
	p.same("rotary dqkv", dqkv)
	qn, kn := p.normal(par, HD, 1), p.normal(par, HD, 1)
	rr := p.output(backend.F32, N*(NH+KV))
	g.QKVRotaryForward(ro.g, rr.g, qkv.g, qn.g, kn.g, cos.g, sin.g, B, T, NH, KV, HD, eps)
	c.QKVRotaryForward(ro.c, rr.c, qkv.c, qn.c, kn.c, cos.c, sin.c, B, T, NH, KV, HD, eps)
	p.same("rotary+qknorm out", ro)
	p.same("rotary+qknorm rstd", rr)
	dqn, dkn := p.normal(par, HD, 0.1), p.normal(par, HD, 0.1)
	g.QKVRotaryBackward(dqkv.g, dqn.g, dkn.g, dro.g, qkv.g, qn.g, kn.g, rr.g, cos.g, sin.g, B, T, NH, KV, HD)
	c.QKVRotaryBackward(dqkv.c, dqn.c, dkn.c, dro.c, qkv.c, qn.c, kn.c, rr.c, cos.c, sin.c, B, T, NH, KV, HD)
	p.same("rotary+qknorm dqkv", dqkv)
	p.same("rotary+qknorm dqnorm", dqn)
	p.same("rotary+qknorm dknorm", dkn)

	// SwiGLU on [gate | up].
	gu, so := p.normal(act, N*2*I, 2), p.output(act, N*I)
	g.SwiGLUForward(so.g, gu.g, N, I)
	c.SwiGLUForward(so.c, gu.c, N, I)
	p.same("swiglu out", so)
	dso, dgu := p.normal(act, N*I, 1), p.output(act, N*2*I)
	g.SwiGLUBackward(dgu.g, dso.g, gu.g, N, I)
	c.SwiGLUBackward(dgu.c, dso.c, gu.c, N, I)
	p.same("swiglu dinp", dgu)
}
