package backendtest

import "math"

// Float64 references for backend.DecoderOps, the Llama family's ops, written
// from transformers' modeling code (LlamaRMSNorm, apply_rotary_pos_emb with
// rotate_half, Qwen3's q_norm/k_norm, LlamaMLP's act_fn(gate)·up) rather than
// from the backends' fused loops. Layouts and argument order follow
// backend.DecoderOps; forward ops overwrite, backward ops overwrite
// activation gradients and accumulate parameter gradients.

// RefRMSNormForward: for each of N rows of C, rstd = 1/√(mean(x²)+eps) and
// out = x·rstd·weight.
func RefRMSNormForward(out, rstd, inp, weight []float64, N, C int, eps float64) {
	for r := 0; r < N; r++ {
		x := inp[r*C : (r+1)*C]
		ms := 0.0
		for _, v := range x {
			ms += v * v
		}
		ms /= float64(C)
		s := 1 / math.Sqrt(ms+eps)
		for c := 0; c < C; c++ {
			out[r*C+c] = x[c] * s * weight[c]
		}
		rstd[r] = s
	}
}

// RefRMSNormBackward follows the chain rule through y = x·s·w with
// s = (m+eps)^(−1/2), m = Σx²/C: ds = Σ dout·w·x, dm = ds·(−½)s³,
// dx = dout·w·s + dm·2x/C. dinp is overwritten; dweight accumulates
// Σ_rows dout·x·s.
func RefRMSNormBackward(dinp, dweight, dout, inp, weight, rstd []float64, N, C int) {
	for r := 0; r < N; r++ {
		x := inp[r*C : (r+1)*C]
		d := dout[r*C : (r+1)*C]
		s := rstd[r]
		ds := 0.0
		for c := 0; c < C; c++ {
			ds += d[c] * weight[c] * x[c]
		}
		dm := ds * -0.5 * s * s * s
		for c := 0; c < C; c++ {
			dinp[r*C+c] = d[c]*weight[c]*s + dm*2*x[c]/float64(C)
			dweight[c] += d[c] * x[c] * s
		}
	}
}

// RefRopeInvFreq is the default RoPE inverse frequencies for head size HD:
// invFreq[j] = 1/θ^(2j/HD), j < HD/2.
func RefRopeInvFreq(HD int, theta float64) []float64 {
	f := make([]float64, HD/2)
	for j := range f {
		f[j] = 1 / math.Pow(theta, float64(2*j)/float64(HD))
	}
	return f
}

// RefRotaryTable returns cos and sin (T, HD/2) of the angles t·invFreq[j].
func RefRotaryTable(T, HD int, invFreq []float64) (cos, sin []float64) {
	h := HD / 2
	cos, sin = make([]float64, T*h), make([]float64, T*h)
	for t := 0; t < T; t++ {
		for j := 0; j < h; j++ {
			a := float64(t) * invFreq[j]
			cos[t*h+j], sin[t*h+j] = math.Cos(a), math.Sin(a)
		}
	}
	return cos, sin
}

// RefQKVRotaryForward: for every token of qkv (B, T, (NH+2·KV)·HD), each
// query and key head is RMS-normalised over HD with qnorm or knorm when they
// are not nil (rstd (B·T·(NH+KV)) then receives one value per head in token
// order), then rotated as transformers' apply_rotary_pos_emb does it:
// x' = x·cat(cos,cos) + rotate_half(x)·cat(sin,sin) with rotate_half(x) =
// cat(−x[HD/2:], x[:HD/2]). Value heads are copied.
func RefQKVRotaryForward(out, rstd, qkv, qnorm, knorm, cos, sin []float64, B, T, NH, KV, HD int, eps float64) {
	W := (NH + 2*KV) * HD
	h := HD / 2
	y := make([]float64, HD)
	rh := make([]float64, HD)
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			tok := b*T + t
			row := qkv[tok*W : (tok+1)*W]
			o := out[tok*W : (tok+1)*W]
			for hd := 0; hd < NH+KV; hd++ {
				x := row[hd*HD : (hd+1)*HD]
				copy(y, x)
				if qnorm != nil {
					w := qnorm
					if hd >= NH {
						w = knorm
					}
					RefRMSNormForward(y, rstd[tok*(NH+KV)+hd:tok*(NH+KV)+hd+1], x, w, 1, HD, eps)
				}
				for i := 0; i < h; i++ {
					rh[i], rh[i+h] = -y[i+h], y[i]
				}
				for i := 0; i < HD; i++ {
					c, s := cos[t*h+i%h], sin[t*h+i%h]
					o[hd*HD+i] = y[i]*c + rh[i]*s
				}
			}
			copy(o[(NH+KV)*HD:], row[(NH+KV)*HD:])
		}
	}
}

// RefQKVRotaryBackward: dqkv (overwritten) is the gradient w.r.t. the
// forward's qkv. The rotation x' = C·x + S·P·x (C, S diagonal, P =
// rotate_half) has the transpose dx = C·d + Pᵀ·(S·d) with
// (Pᵀu)[i] = u[i+HD/2] and (Pᵀu)[i+HD/2] = −u[i]; with norms the result is
// the normalised head's gradient, taken through RefRMSNormBackward (dqnorm,
// dknorm accumulate). Value heads pass dout through.
func RefQKVRotaryBackward(dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin []float64, B, T, NH, KV, HD int) {
	W := (NH + 2*KV) * HD
	h := HD / 2
	sd := make([]float64, HD)
	dy := make([]float64, HD)
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			tok := b*T + t
			d := dout[tok*W : (tok+1)*W]
			o := dqkv[tok*W : (tok+1)*W]
			for hd := 0; hd < NH+KV; hd++ {
				dh := d[hd*HD : (hd+1)*HD]
				for i := 0; i < HD; i++ {
					sd[i] = sin[t*h+i%h] * dh[i]
				}
				for i := 0; i < h; i++ {
					dy[i] = cos[t*h+i]*dh[i] + sd[i+h]
					dy[i+h] = cos[t*h+i]*dh[i+h] - sd[i]
				}
				if qnorm == nil {
					copy(o[hd*HD:(hd+1)*HD], dy)
					continue
				}
				w, dw := qnorm, dqnorm
				if hd >= NH {
					w, dw = knorm, dknorm
				}
				r := tok*(NH+KV) + hd
				RefRMSNormBackward(o[hd*HD:(hd+1)*HD], dw, dy, qkv[tok*W+hd*HD:tok*W+(hd+1)*HD], w, rstd[r:r+1], 1, HD)
			}
			copy(o[(NH+KV)*HD:], d[(NH+KV)*HD:])
		}
	}
}

// RefSwiGLUForward: out (N, I) = silu(gate)·up with silu(z) = z·σ(z),
// σ(z) = 1/(1+e^−z), from inp (N, 2·I) = [gate | up] per row.
func RefSwiGLUForward(out, inp []float64, N, I int) {
	for r := 0; r < N; r++ {
		for i := 0; i < I; i++ {
			g, u := inp[r*2*I+i], inp[r*2*I+I+i]
			out[r*I+i] = g * refSigmoid(g) * u
		}
	}
}

// RefSwiGLUBackward: dinp (N, 2·I) (overwritten) with
// dgate = dout·up·σ(g)·(1 + g·(1−σ(g))) and dup = dout·silu(g).
func RefSwiGLUBackward(dinp, dout, inp []float64, N, I int) {
	for r := 0; r < N; r++ {
		for i := 0; i < I; i++ {
			g, u := inp[r*2*I+i], inp[r*2*I+I+i]
			d := dout[r*I+i]
			sg := refSigmoid(g)
			dinp[r*2*I+i] = d * u * sg * (1 + g*(1-sg))
			dinp[r*2*I+I+i] = d * g * sg
		}
	}
}

// refSigmoid is σ(z) without overflow for large |z|.
func refSigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z)
	return e / (1 + e)
}
