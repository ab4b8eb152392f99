package compare

import (
	"math"
	"runtime"
	"sync"

	"github.com/gotrain/gotrain/backend"
)

// attRounding is how much of each term of an attention result the two
// backends' roundings may move it by. Per term, a result sums p·v (out),
// p·dO (dV), dS·k (dQ) or dS·q (dK), with p the causal softmax and
// dS = p·(dP − D), dP = dO·v, D = rowsum(dO∘out).
//
// In fp32 (both backends, any storage) a term is off by a share e32 of the
// magnitudes it is computed from: for dS terms those include dP and D
// themselves, whose difference cancels (dS at the first token is exactly
// zero, but not in fp32), so the magnitude is p·(|dP − D| + Σ|dO||v| +
// Σ|dO||out|). e32 is (4·√n + HD)·2^-24 for a result of n terms: their
// rounding errors add as a random walk (four times its spread: the worst
// of millions of elements), and each term also carries its score's error,
// a sum of HD products that the exponential turns into a relative error
// of p.
//
// In 16-bit storage a backend may round p and dS to 16 bits before its
// tensor-core products (backend.go): e16 = 2^-8 (half an ulp) of each
// term |p·v|, |p·dO|, |dS·k|, |dS·q|.
type attRounding struct{ e32Out, e32D, e16 float64 }

func newAttRounding(s AttentionShape, act backend.DType) attRounding {
	e32 := func(n int) float64 { return (4*math.Sqrt(float64(n)) + float64(s.HD)) * 0x1p-24 }
	r := attRounding{e32Out: e32(s.T), e32D: e32(s.T * s.NH / s.KV)}
	if act != backend.F32 {
		r.e16 = 0x1p-8
	}
	return r
}

// attentionAllowance sets, per element of aOut (like out, B,T,NH·HD) and
// aD (like qkv, B,T,(NH+2·KV)·HD), what the rounding of the terms it sums
// may move it by (attRounding), computed in float64 from the inputs as
// the reference stored them: qkv, dout and out.
func attentionAllowance(aOut, aD, qkv, dout, out []float64, s AttentionShape, rnd attRounding) {
	clear(aOut)
	clear(aD)
	// Each (sequence, query head) runs apart into its own dK and dV rows,
	// summed into aD afterwards in head order, so the result does not
	// depend on the scheduling.
	type part struct{ dk, dv []float64 }
	parts := make([]part, s.B*s.NH)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(parts)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				pt := part{make([]float64, s.T*s.HD), make([]float64, s.T*s.HD)}
				headAllowance(aOut, aD, pt.dk, pt.dv, qkv, dout, out, s, rnd, j/s.NH, j%s.NH)
				parts[j] = pt
			}
		}()
	}
	for j := range parts {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	l := attLayout{s}
	for j, pt := range parts {
		b, h := j/s.NH, j%s.NH
		for u := range s.T {
			dk, dv := aD[l.k(b, u, h):][:s.HD], aD[l.v(b, u, h):][:s.HD]
			for i := range s.HD {
				dk[i] += pt.dk[u*s.HD+i]
				dv[i] += pt.dv[u*s.HD+i]
			}
		}
	}
}

// attLayout locates a head's vectors in qkv and dqkv (q, k, v) and in out
// and dout (o).
type attLayout struct{ s AttentionShape }

func (l attLayout) row(b, t int) int  { return (b*l.s.T + t) * (l.s.NH + 2*l.s.KV) * l.s.HD }
func (l attLayout) q(b, t, h int) int { return l.row(b, t) + h*l.s.HD }
func (l attLayout) k(b, t, h int) int { return l.row(b, t) + (l.s.NH+h/(l.s.NH/l.s.KV))*l.s.HD }
func (l attLayout) v(b, t, h int) int { return l.k(b, t, h) + l.s.KV*l.s.HD }
func (l attLayout) o(b, t, h int) int { return ((b*l.s.T+t)*l.s.NH + h) * l.s.HD }

// headAllowance is attentionAllowance for query head h of sequence b: it
// writes the head's rows of aOut and its dQ rows of aD, and adds its
// share of dK and dV into dk and dv (T·HD each).
func headAllowance(aOut, aD, dk, dv, qkv, dout, out []float64, s AttentionShape, rnd attRounding, b, h int) {
	l := attLayout{s}
	HD := s.HD
	scale := 1 / math.Sqrt(float64(HD))
	p := make([]float64, s.T)
	for t := range s.T {
		q := qkv[l.q(b, t, h):][:HD]
		softmax(p[:t+1], func(u int) float64 { return scale * dot(q, qkv[l.k(b, u, h):][:HD]) })
		o, do := out[l.o(b, t, h):][:HD], dout[l.o(b, t, h):][:HD]
		D, absD := dot(do, o), dotAbs(do, o)
		ao, dq := aOut[l.o(b, t, h):][:HD], aD[l.q(b, t, h):][:HD]
		for u := 0; u <= t; u++ {
			v, k := qkv[l.v(b, u, h):][:HD], qkv[l.k(b, u, h):][:HD]
			addAbs(ao, (rnd.e32Out+rnd.e16)*p[u], v)
			dP := dot(do, v)
			dS := math.Abs(p[u] * (dP - D))
			mag := p[u] * (math.Abs(dP-D) + dotAbs(do, v) + absD)
			c := scale * (rnd.e32D*mag + rnd.e16*dS)
			addAbs(dq, c, k)
			addAbs(dk[u*HD:][:HD], c, q)
			addAbs(dv[u*HD:][:HD], (rnd.e32D+rnd.e16)*p[u], do)
		}
	}
}

// softmax sets p[u] to the softmax over u of score(u).
func softmax(p []float64, score func(u int) float64) {
	m := math.Inf(-1)
	for u := range p {
		p[u] = score(u)
		m = math.Max(m, p[u])
	}
	var z float64
	for u := range p {
		p[u] = math.Exp(p[u] - m)
		z += p[u]
	}
	for u := range p {
		p[u] /= z
	}
}

func dot(x, y []float64) float64 {
	var s float64
	for i, v := range x {
		s += v * y[i]
	}
	return s
}

// dotAbs is Σ|x_i·y_i|.
func dotAbs(x, y []float64) float64 {
	var s float64
	for i, v := range x {
		s += math.Abs(v * y[i])
	}
	return s
}

// addAbs adds a·|x| to acc.
func addAbs(acc []float64, a float64, x []float64) {
	for i, v := range x {
		acc[i] += a * math.Abs(v)
	}
}
