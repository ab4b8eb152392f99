package model

import (
	"math"
	"strconv"
)

// refGPT2 is an independent float64 GPT-2 forward in plain loops (nanoGPT's
// graph), reading parameters from the flat layout by name.
type refGPT2 struct {
	cfg Config
	lay *Layout
	p   []float64
}

func (r *refGPT2) t(name string) []float64 {
	ts, ok := r.lay.Lookup(name)
	if !ok {
		panic("no tensor " + name)
	}
	return r.p[ts.Offset : ts.Offset+ts.Len]
}

func refLayerNorm(x, w, b []float64, N, C int) []float64 {
	out := make([]float64, N*C)
	for n := 0; n < N; n++ {
		row := x[n*C : (n+1)*C]
		var mean, v float64
		for _, xi := range row {
			mean += xi
		}
		mean /= float64(C)
		for _, xi := range row {
			v += (xi - mean) * (xi - mean)
		}
		v /= float64(C)
		s := 1 / math.Sqrt(v+1e-5)
		for c, xi := range row {
			out[n*C+c] = (xi-mean)*s*w[c] + b[c]
		}
	}
	return out
}

// refLinear is y = x·Wᵀ + b with W (out, in).
func refLinear(x, w, b []float64, N, in, out int) []float64 {
	y := make([]float64, N*out)
	for n := 0; n < N; n++ {
		for o := 0; o < out; o++ {
			s := 0.0
			if b != nil {
				s = b[o]
			}
			for i := 0; i < in; i++ {
				s += x[n*in+i] * w[o*in+i]
			}
			y[n*out+o] = s
		}
	}
	return y
}

func refAttention(qkv []float64, B, T, C, NH int) []float64 {
	hs := C / NH
	out := make([]float64, B*T*C)
	scale := 1 / math.Sqrt(float64(hs))
	for b := 0; b < B; b++ {
		for h := 0; h < NH; h++ {
			for t := 0; t < T; t++ {
				q := qkv[(b*T+t)*3*C+h*hs:]
				scores := make([]float64, t+1)
				m := math.Inf(-1)
				for u := 0; u <= t; u++ {
					k := qkv[(b*T+u)*3*C+C+h*hs:]
					s := 0.0
					for i := 0; i < hs; i++ {
						s += q[i] * k[i]
					}
					scores[u] = s * scale
					m = math.Max(m, scores[u])
				}
				sum := 0.0
				for u := range scores {
					scores[u] = math.Exp(scores[u] - m)
					sum += scores[u]
				}
				for u := range scores {
					v := qkv[(b*T+u)*3*C+2*C+h*hs:]
					for i := 0; i < hs; i++ {
						out[(b*T+t)*C+h*hs+i] += scores[u] / sum * v[i]
					}
				}
			}
		}
	}
	return out
}

func refGelu(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// forward returns the (B·T, V) logits and the per-token losses (nil without
// targets).
func (r *refGPT2) forward(inp, tgt []int32, B, T int) (logits, losses []float64) {
	cfg := r.cfg
	C, N := cfg.C, B*T
	wte, wpe := r.t("wte.weight"), r.t("wpe.weight")
	x := make([]float64, N*C)
	for n := 0; n < N; n++ {
		for c := 0; c < C; c++ {
			x[n*C+c] = wte[int(inp[n])*C+c] + wpe[(n%T)*C+c]
		}
	}
	for l := 0; l < cfg.L; l++ {
		p := func(s string) []float64 { return r.t("h." + strconv.Itoa(l) + "." + s) }
		h := refLayerNorm(x, p("ln_1.weight"), p("ln_1.bias"), N, C)
		qkv := refLinear(h, p("attn.c_attn.weight"), p("attn.c_attn.bias"), N, C, 3*C)
		y := refAttention(qkv, B, T, C, cfg.NH)
		a := refLinear(y, p("attn.c_proj.weight"), p("attn.c_proj.bias"), N, C, C)
		for i := range x {
			x[i] += a[i]
		}
		h = refLayerNorm(x, p("ln_2.weight"), p("ln_2.bias"), N, C)
		f := refLinear(h, p("mlp.c_fc.weight"), p("mlp.c_fc.bias"), N, C, 4*C)
		for i := range f {
			f[i] = refGelu(f[i])
		}
		m := refLinear(f, p("mlp.c_proj.weight"), p("mlp.c_proj.bias"), N, 4*C, C)
		for i := range x {
			x[i] += m[i]
		}
	}
	h := refLayerNorm(x, r.t("ln_f.weight"), r.t("ln_f.bias"), N, C)
	logits = refLinear(h, wte[:cfg.V*C], nil, N, C, cfg.V) // the padded rows never enter
	if tgt == nil {
		return logits, nil
	}
	losses = make([]float64, N)
	for n := 0; n < N; n++ {
		row := logits[n*cfg.V : (n+1)*cfg.V]
		m := math.Inf(-1)
		for _, z := range row {
			m = math.Max(m, z)
		}
		s := 0.0
		for _, z := range row {
			s += math.Exp(z - m)
		}
		losses[n] = math.Log(s) + m - row[tgt[n]]
	}
	return logits, losses
}

func (r *refGPT2) meanLoss(inp, tgt []int32, B, T int) float64 {
	_, losses := r.forward(inp, tgt, B, T)
	s := 0.0
	for _, l := range losses {
		s += l
	}
	return s / float64(len(losses))
}
