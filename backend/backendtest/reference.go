package backendtest

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// This file holds float64 reference implementations of every Backend op,
// written as plain loops straight from the math (textbook derivations, not
// the backends' fused formulas) so they can judge any backend. Shapes and
// argument order follow backend.Backend; slices are exactly the op's sizes.
// Forward ops overwrite their outputs; backward ops follow the Backend's
// rules: parameter gradients +=, activation gradients =.

// RefEncoderForward: out (B,T,C) = wte[inp[b,t]] + wpe[t].
func RefEncoderForward(out []float64, inp []int32, wte, wpe []float64, B, T, C int) {
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			id := int(inp[b*T+t])
			for c := 0; c < C; c++ {
				out[(b*T+t)*C+c] = wte[id*C+c] + wpe[t*C+c]
			}
		}
	}
}

// RefEncoderBackward: dwte[inp[b,t]] += dout[b,t]; dwpe[t] += dout[b,t].
func RefEncoderBackward(dwte, dwpe, dout []float64, inp []int32, B, T, C int) {
	for b := 0; b < B; b++ {
		for t := 0; t < T; t++ {
			id := int(inp[b*T+t])
			for c := 0; c < C; c++ {
				g := dout[(b*T+t)*C+c]
				dwte[id*C+c] += g
				dwpe[t*C+c] += g
			}
		}
	}
}

// RefLNEps is GPT-2's LayerNorm epsilon.
const RefLNEps = 1e-5

// RefLayerNormForward normalises each of N rows of C with the biased
// variance: out = (x−μ)/√(σ²+eps)·weight + bias; mean = μ, rstd = 1/√(σ²+eps).
func RefLayerNormForward(out, mean, rstd, inp, weight, bias []float64, N, C int) {
	for r := 0; r < N; r++ {
		x := inp[r*C : (r+1)*C]
		mu := 0.0
		for _, v := range x {
			mu += v
		}
		mu /= float64(C)
		variance := 0.0
		for _, v := range x {
			variance += (v - mu) * (v - mu)
		}
		variance /= float64(C)
		s := 1 / math.Sqrt(variance+RefLNEps)
		for c := 0; c < C; c++ {
			out[r*C+c] = (x[c]-mu)*s*weight[c] + bias[c]
		}
		mean[r], rstd[r] = mu, s
	}
}

// RefLayerNormBackward follows the chain rule through x̂ = (x−μ)·s,
// s = (σ²+eps)^(−1/2): dx̂ = dout·w, dσ² = Σ dx̂·(x−μ)·(−½)s³,
// dμ = −Σ dx̂·s + dσ²·(−2/C)Σ(x−μ), dx = dx̂·s + dσ²·2(x−μ)/C + dμ/C.
// dinp is overwritten; dweight and dbias accumulate.
func RefLayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd []float64, N, C int) {
	for r := 0; r < N; r++ {
		x := inp[r*C : (r+1)*C]
		d := dout[r*C : (r+1)*C]
		mu, s := mean[r], rstd[r]
		dvar, dmu, sumCentred := 0.0, 0.0, 0.0
		for c := 0; c < C; c++ {
			dxh := d[c] * weight[c]
			dvar += dxh * (x[c] - mu) * -0.5 * s * s * s
			dmu += -dxh * s
			sumCentred += x[c] - mu
		}
		dmu += dvar * -2 * sumCentred / float64(C)
		for c := 0; c < C; c++ {
			dxh := d[c] * weight[c]
			dinp[r*C+c] = dxh*s + dvar*2*(x[c]-mu)/float64(C) + dmu/float64(C)
			dweight[c] += d[c] * (x[c] - mu) * s
			dbias[c] += d[c]
		}
	}
}

// RefMatmulForward: out (N,OC) = inp (N,C) · weight (OC,C)ᵀ + bias (OC);
// bias may be nil.
func RefMatmulForward(out, inp, weight, bias []float64, N, C, OC int) {
	for r := 0; r < N; r++ {
		for o := 0; o < OC; o++ {
			s := 0.0
			if bias != nil {
				s = bias[o]
			}
			for c := 0; c < C; c++ {
				s += inp[r*C+c] * weight[o*C+c]
			}
			out[r*OC+o] = s
		}
	}
}

// RefMatmulBackward: dinp = dout·weight (overwritten, skipped when nil);
// dweight += doutᵀ·inp; dbias += column sums of dout (skipped when nil).
func RefMatmulBackward(dinp, dweight, dbias, dout, inp, weight []float64, N, C, OC int) {
	for r := 0; r < N; r++ {
		for c := 0; c < C; c++ {
			if dinp != nil {
				s := 0.0
				for o := 0; o < OC; o++ {
					s += dout[r*OC+o] * weight[o*C+c]
				}
				dinp[r*C+c] = s
			}
		}
		for o := 0; o < OC; o++ {
			g := dout[r*OC+o]
			for c := 0; c < C; c++ {
				dweight[o*C+c] += g * inp[r*C+c]
			}
			if dbias != nil {
				dbias[o] += g
			}
		}
	}
}

// refAttnLayout indexes qkv (B,T,(NH+2·KV)·HD): per token NH query heads,
// KV key heads, KV value heads; query head h reads key/value head
// h/(NH/KV).
type refAttnLayout struct{ T, NH, KV, HD int }

func (l refAttnLayout) q(b, t, h int) int { return (b*l.T+t)*(l.NH+2*l.KV)*l.HD + h*l.HD }
func (l refAttnLayout) k(b, t, h int) int { return l.q(b, t, l.NH+h/(l.NH/l.KV)) }
func (l refAttnLayout) v(b, t, h int) int { return l.q(b, t, l.NH+l.KV+h/(l.NH/l.KV)) }

// refAttnProbs fills p[:t+1] with query row (b,h,t)'s causal softmax
// probabilities over the scaled scores and returns their log-sum-exp.
func (l refAttnLayout) probs(p, qkv []float64, b, h, t int) float64 {
	scale := 1 / math.Sqrt(float64(l.HD))
	q := qkv[l.q(b, t, h):][:l.HD]
	mx := math.Inf(-1)
	for u := 0; u <= t; u++ {
		k := qkv[l.k(b, u, h):][:l.HD]
		s := 0.0
		for i, qi := range q {
			s += qi * k[i]
		}
		p[u] = s * scale
		mx = math.Max(mx, p[u])
	}
	z := 0.0
	for u := 0; u <= t; u++ {
		z += math.Exp(p[u] - mx)
	}
	for u := 0; u <= t; u++ {
		p[u] = math.Exp(p[u]-mx) / z
	}
	return mx + math.Log(z)
}

// RefAttentionForward: naive causal self-attention over qkv
// (B,T,(NH+2·KV)·HD), query head h using key/value head h/(NH/KV), scale
// 1/sqrt(HD): out (B,T,NH·HD) = P·V per head with P each row's softmax,
// lse (B,NH,T) each row's log-sum-exp of the scaled scores (skipped when
// nil). It holds one row of probabilities at a time.
func RefAttentionForward(out, lse, qkv []float64, B, T, NH, KV, HD int) {
	l := refAttnLayout{T, NH, KV, HD}
	p := make([]float64, T)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for t := 0; t < T; t++ {
				z := l.probs(p, qkv, b, h, t)
				if lse != nil {
					lse[(b*NH+h)*T+t] = z
				}
				o := out[(b*T+t)*NH*HD+h*HD:][:HD]
				clear(o)
				for u := 0; u <= t; u++ {
					v := qkv[l.v(b, u, h):][:HD]
					for i, vi := range v {
						o[i] += p[u] * vi
					}
				}
			}
		}
	}
}

// RefAttentionBackward: dqkv (B,T,(NH+2·KV)·HD) (overwritten) from dout
// (B,T,NH·HD), the probabilities recomputed row by row: dV = Pᵀ·dO,
// dP = dO·Vᵀ, dS = P∘(dP − D), dQ = dS·K·scale, dK = dSᵀ·Q·scale; a
// key/value head's gradients sum over its query heads. D is each row's
// rowsum(P∘dP), or with out (B,T,NH·HD) given, rowsum(dO∘out), which is
// the same number for the exact out; a backend reads the out it stored,
// so a test of 16-bit storage passes that.
func RefAttentionBackward(dqkv, dout, out, qkv []float64, B, T, NH, KV, HD int) {
	l := refAttnLayout{T, NH, KV, HD}
	scale := 1 / math.Sqrt(float64(HD))
	clear(dqkv)
	P, dP := make([]float64, T), make([]float64, T)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for t := 0; t < T; t++ {
				l.probs(P, qkv, b, h, t)
				do := dout[(b*T+t)*NH*HD+h*HD:][:HD]
				q, dq := qkv[l.q(b, t, h):][:HD], dqkv[l.q(b, t, h):][:HD]
				rs := 0.0
				for u := 0; u <= t; u++ {
					v := qkv[l.v(b, u, h):][:HD]
					s := 0.0
					for i, di := range do {
						s += di * v[i]
					}
					dP[u] = s
					rs += P[u] * s
				}
				if out != nil {
					o := out[(b*T+t)*NH*HD+h*HD:][:HD]
					rs = 0
					for i, di := range do {
						rs += di * o[i]
					}
				}
				for u := 0; u <= t; u++ {
					dS := P[u] * (dP[u] - rs)
					k := qkv[l.k(b, u, h):][:HD]
					dk, dv := dqkv[l.k(b, u, h):][:HD], dqkv[l.v(b, u, h):][:HD]
					for i := range HD {
						dv[i] += P[u] * do[i]
						dq[i] += dS * k[i] * scale
						dk[i] += dS * q[i] * scale
					}
				}
			}
		}
	}
}

// RefAttentionRoundingBound sets, for each element of bOut (B,T,NH·HD;
// skipped when nil) and of bD (B,T,(NH+2·KV)·HD; skipped when nil), the
// sum of the magnitudes of the terms that rounding a probability or a dS
// to 16 bits perturbs: out: Σ_u p·|v|; dV: Σ_t p·|dO|; dQ: scale·Σ_u
// |dS|·|k|; dK: scale·Σ_t |dS|·|q|. A relative error of ε in each term
// (a backend that rounds P and dS to bf16 for tensor-core products) moves
// the element by at most ε times its bound. out is the stored output that
// D = rowsum(dO∘out) reads (needed with bD).
func RefAttentionRoundingBound(bOut, bD, qkv, dout, out []float64, B, T, NH, KV, HD int) {
	l := refAttnLayout{T, NH, KV, HD}
	scale := 1 / math.Sqrt(float64(HD))
	if bD != nil {
		clear(bD)
	}
	P := make([]float64, T)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for t := 0; t < T; t++ {
				l.probs(P, qkv, b, h, t)
				if bOut != nil {
					o := bOut[(b*T+t)*NH*HD+h*HD:][:HD]
					clear(o)
					for u := 0; u <= t; u++ {
						for i, vi := range qkv[l.v(b, u, h):][:HD] {
							o[i] += P[u] * math.Abs(vi)
						}
					}
				}
				if bD == nil {
					continue
				}
				do := dout[(b*T+t)*NH*HD+h*HD:][:HD]
				o := out[(b*T+t)*NH*HD+h*HD:][:HD]
				D := 0.0
				for i, di := range do {
					D += di * o[i]
				}
				q, dq := qkv[l.q(b, t, h):][:HD], bD[l.q(b, t, h):][:HD]
				for u := 0; u <= t; u++ {
					v, k := qkv[l.v(b, u, h):][:HD], qkv[l.k(b, u, h):][:HD]
					dP := 0.0
					for i, di := range do {
						dP += di * v[i]
					}
					dS := math.Abs(P[u] * (dP - D))
					dk, dv := bD[l.k(b, u, h):][:HD], bD[l.v(b, u, h):][:HD]
					for i := range HD {
						dv[i] += P[u] * math.Abs(do[i])
						dq[i] += dS * math.Abs(k[i]) * scale
						dk[i] += dS * math.Abs(q[i]) * scale
					}
				}
			}
		}
	}
}

// RefGeluForward: out = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func RefGeluForward(out, inp []float64) {
	k := math.Sqrt(2 / math.Pi)
	for i, x := range inp {
		out[i] = 0.5 * x * (1 + math.Tanh(k*(x+0.044715*x*x*x)))
	}
}

// RefGeluBackward: dinp = gelu'(inp)·dout (overwritten), differentiating the
// tanh form directly.
func RefGeluBackward(dinp, inp, dout []float64) {
	k := math.Sqrt(2 / math.Pi)
	for i, x := range inp {
		u := k * (x + 0.044715*x*x*x)
		th := math.Tanh(u)
		du := k * (1 + 3*0.044715*x*x)
		dinp[i] = (0.5*(1+th) + 0.5*x*(1-th*th)*du) * dout[i]
	}
}

// RefCrossEntropyForward: for each of N rows of logits (N,Vp), probs over the
// first V columns (padded columns get 0) and losses = logsumexp − logit[target].
func RefCrossEntropyForward(losses, probs, logits []float64, targets []int32, N, V, Vp int) {
	for r := 0; r < N; r++ {
		x := logits[r*Vp : r*Vp+V]
		mx := math.Inf(-1)
		for _, v := range x {
			mx = math.Max(mx, v)
		}
		z := 0.0
		for _, v := range x {
			z += math.Exp(v - mx)
		}
		lse := mx + math.Log(z)
		for j := 0; j < Vp; j++ {
			if j < V {
				probs[r*Vp+j] = math.Exp(x[j] - lse)
			} else {
				probs[r*Vp+j] = 0
			}
		}
		losses[r] = lse - x[targets[r]]
	}
}

// RefCrossEntropyBackward: dlogits = (probs − onehot(target))·dloss over the
// first V columns, 0 in the padded ones (overwritten).
func RefCrossEntropyBackward(dlogits, probs []float64, targets []int32, dloss float64, N, V, Vp int) {
	for r := 0; r < N; r++ {
		for j := 0; j < Vp; j++ {
			g := 0.0
			if j < V {
				g = probs[r*Vp+j]
				if j == int(targets[r]) {
					g -= 1
				}
			}
			dlogits[r*Vp+j] = g * dloss
		}
	}
}

// RefAdamW is one step of torch.optim.AdamW (its single-tensor algorithm, in
// its order of operations) in float64: decay p by 1−lr·wd, lerp m toward g,
// v = β2·v + (1−β2)·g², then p −= lr/(1−β1^t) · m / (√v/√(1−β2^t) + eps).
// grad is multiplied by p.GradScale first.
func RefAdamW(param, grad, m, v []float64, p backend.AdamWParams) {
	lr, b1, b2 := float64(p.LR), float64(p.Beta1), float64(p.Beta2)
	eps, wd, gs := float64(p.Eps), float64(p.WeightDecay), float64(p.GradScale)
	step := float64(p.Step)
	bc1 := 1 - math.Pow(b1, step)
	bc2 := 1 - math.Pow(b2, step)
	for i := range param {
		g := grad[i] * gs
		param[i] *= 1 - lr*wd
		m[i] += (g - m[i]) * (1 - b1)
		v[i] = v[i]*b2 + (1-b2)*g*g
		denom := math.Sqrt(v[i])/math.Sqrt(bc2) + eps
		param[i] -= lr / bc1 * m[i] / denom
	}
}
