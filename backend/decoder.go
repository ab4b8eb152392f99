package backend

// DecoderOps are the ops of the Llama family of decoders (Llama, Mistral,
// Qwen2, Qwen3) beyond GPT-2's: RMSNorm, rotary position embeddings with
// Qwen3's optional per-head query/key norm, and SwiGLU. A backend without
// them trains GPT-2 only; the model says so when asked for another family.
//
// Layouts follow the fused projections the model uses. The attention input
// qkv (B, T, (NH+2·KV)·HD) holds, per token, NH query heads, then KV key
// heads, then KV value heads of HD elements each (q_proj, k_proj and v_proj
// stacked, as GPT-2's c_attn stacks q, k and v with KV = NH). The MLP input
// of SwiGLU (N, 2·I) holds, per row, the I gate_proj outputs then the I
// up_proj outputs. cos and sin are F32 (T, HD/2): position t, frequency j.
// The conventions of backend.go hold: parameter gradients accumulate,
// activation gradients are overwritten, 16-bit storage computes in fp32.
type DecoderOps interface {
	// RMSNormForward over N rows of C: rstd (N, F32) = 1/sqrt(mean(inp²)+eps),
	// saved for backward; out = inp·rstd·weight.
	RMSNormForward(out, rstd, inp, weight Buffer, N, C int, eps float32)
	// RMSNormBackward: dinp = gradient w.r.t. inp (=); dweight += Σ_rows
	// dout·inp·rstd (dweight may be the zero Buffer: a frozen norm).
	RMSNormBackward(dinp, dweight, dout, inp, weight, rstd Buffer, N, C int)
	// ResidualRMSNormForward: residual = a + b over N·C elements (residual
	// may alias a or b), then RMSNormForward(out, rstd, residual, weight, N,
	// C, eps). The results must equal that two-op sequence's.
	ResidualRMSNormForward(residual, out, rstd, a, b, weight Buffer, N, C int, eps float32)

	// QKVRotaryForward prepares attention's input from the projection qkv:
	// when qnorm and knorm (HD each) are given, every query head is
	// RMS-normalised over its HD elements with weight qnorm and every key
	// head with knorm (Qwen3; rstd (B·T·(NH+KV), F32) saved, one per head in
	// token order), then query and key heads are rotated at position t:
	// for j < HD/2, x'_j = x_j·cos[t,j] − x_{j+HD/2}·sin[t,j] and
	// x'_{j+HD/2} = x_{j+HD/2}·cos[t,j] + x_j·sin[t,j] (transformers'
	// rotate_half). Value heads are copied. out has qkv's shape; it may
	// alias qkv when no norm is given (rstd and the norms are then the zero
	// Buffer).
	QKVRotaryForward(out, rstd, qkv, qnorm, knorm, cos, sin Buffer, B, T, NH, KV, HD int, eps float32)
	// QKVRotaryBackward: dqkv = gradient w.r.t. the forward's qkv (=);
	// dqnorm, dknorm += (when given; with the norms they may still both be
	// the zero Buffer, for frozen norms). dqkv may alias dout when no norm is
	// given.
	QKVRotaryBackward(dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin Buffer, B, T, NH, KV, HD int)

	// SwiGLUForward: out (N, I) = silu(gate)·up, silu(z) = z/(1+e^−z), from
	// inp (N, 2·I) = [gate | up] per row.
	SwiGLUForward(out, inp Buffer, N, I int)
	// SwiGLUBackward: dinp (N, 2·I) = gradient w.r.t. inp (=).
	SwiGLUBackward(dinp, dout, inp Buffer, N, I int)
}
