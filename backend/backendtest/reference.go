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

// RefAttentionForward: causal self-attention over qkv (B,T,3C) with q, k, v
// side by side and NH heads of HS = C/NH. att (B,NH,T,T) receives the
// softmax probabilities (0 above the diagonal); out (B,T,C) = att·v per head.
func RefAttentionForward(out, att, qkv []float64, B, T, C, NH int) {
	HS := C / NH
	scale := 1 / math.Sqrt(float64(HS))
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for t := 0; t < T; t++ {
				row := att[((b*NH+h)*T+t)*T : ((b*NH+h)*T+t+1)*T]
				mx := math.Inf(-1)
				for u := 0; u <= t; u++ {
					s := 0.0
					for i := 0; i < HS; i++ {
						s += qkv[(b*T+t)*3*C+h*HS+i] * qkv[(b*T+u)*3*C+C+h*HS+i]
					}
					row[u] = s * scale
					mx = math.Max(mx, row[u])
				}
				z := 0.0
				for u := 0; u <= t; u++ {
					z += math.Exp(row[u] - mx)
				}
				for u := 0; u < T; u++ {
					if u <= t {
						row[u] = math.Exp(row[u]-mx) / z
					} else {
						row[u] = 0
					}
				}
				for i := 0; i < HS; i++ {
					s := 0.0
					for u := 0; u <= t; u++ {
						s += row[u] * qkv[(b*T+u)*3*C+2*C+h*HS+i]
					}
					out[(b*T+t)*C+h*HS+i] = s
				}
			}
		}
	}
}

// RefAttentionBackward: dqkv (B,T,3C) (overwritten) from dout (B,T,C) with
// P = att: dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(P∘dP)),
// dQ = dS·K·scale, dK = dSᵀ·Q·scale.
func RefAttentionBackward(dqkv, dout, qkv, att []float64, B, T, C, NH int) {
	HS := C / NH
	scale := 1 / math.Sqrt(float64(HS))
	clear(dqkv)
	q := func(b, t, i int) int { return (b*T+t)*3*C + i }
	dP := make([]float64, T)
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for t := 0; t < T; t++ {
				P := att[((b*NH+h)*T+t)*T : ((b*NH+h)*T+t+1)*T]
				rs := 0.0
				for u := 0; u <= t; u++ {
					s := 0.0
					for i := 0; i < HS; i++ {
						s += dout[(b*T+t)*C+h*HS+i] * qkv[q(b, u, 2*C+h*HS+i)]
					}
					dP[u] = s
					rs += P[u] * s
				}
				for u := 0; u <= t; u++ {
					dS := P[u] * (dP[u] - rs)
					for i := 0; i < HS; i++ {
						dqkv[q(b, u, 2*C+h*HS+i)] += P[u] * dout[(b*T+t)*C+h*HS+i]
						dqkv[q(b, t, h*HS+i)] += dS * qkv[q(b, u, C+h*HS+i)] * scale
						dqkv[q(b, u, C+h*HS+i)] += dS * qkv[q(b, t, h*HS+i)] * scale
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
