// Package compare runs every Backend op on two backends with the same
// inputs and reports, per output tensor, how far the results are apart. The
// CUDA backend's tests compare it with the CPU backend this way (kernels
// under emulation), and `gotrain doctor --selftest` does the same on a real
// GPU, printing the table.
//
// Tolerances are by storage dtype, relative to the reference result's RMS
// plus the element's magnitude: a few units in the last place of the
// storage type, since two backends may round one fp32 intermediate
// differently and the rounding to 16 bits amplifies it.
package compare

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gotrain/gotrain/backend"
)

// Shape is a GPT-2 layer shape to test at.
type Shape struct {
	B, T, C, NH, V, Vp int
}

func (s Shape) String() string {
	return fmt.Sprintf("B%dT%dC%dNH%dV%d", s.B, s.T, s.C, s.NH, s.V)
}

// DTypes is a storage mix: activations and parameters.
type DTypes struct {
	Name       string
	Act, Param backend.DType
}

// Shapes are small and awkward: head size 5, nothing a power of two, a
// padded vocabulary, a sequence longer than a warp.
func Shapes() []Shape {
	return []Shape{
		{B: 2, T: 5, C: 20, NH: 4, V: 13, Vp: 16},
		{B: 1, T: 37, C: 64, NH: 2, V: 70, Vp: 96},
		{B: 3, T: 9, C: 96, NH: 3, V: 301, Vp: 320},
	}
}

// Mixes are every storage mix the trainer uses.
func Mixes() []DTypes {
	return []DTypes{
		{"fp32", backend.F32, backend.F32},
		{"bf16", backend.BF16, backend.BF16},
		{"fp16", backend.F16, backend.F16},
		{"mixed", backend.BF16, backend.F32},
	}
}

// Result is one output tensor of one op.
type Result struct {
	Tensor string // "layernorm dweight"
	DType  backend.DType
	// MaxErr is max |got − want| / (rms(want) + |want|) over the tensor;
	// Tol is the bound for DType.
	MaxErr, Tol float64
	Bad, N      int    // elements over the bound, elements compared
	Err         string // a failure that is not a numeric difference
}

// OK says the tensor matched.
func (r Result) OK() bool { return r.Err == "" && r.Bad == 0 }

// Tol is the relative tolerance for results stored in dt.
func Tol(dt backend.DType) float64 {
	switch dt {
	case backend.BF16:
		return 1.6e-2
	case backend.F16:
		return 2e-3
	}
	return 2e-5
}

// Run runs every op at shape s and mix d on got and want (the reference)
// with inputs drawn from seed, and returns a Result per output tensor. An
// error is a failure to allocate or move data, not a mismatch.
func Run(got, want backend.Backend, s Shape, d DTypes, seed uint64) (res []Result, err error) {
	p := &pair{g: got, c: want, r: rand.New(rand.NewPCG(seed, uint64(s.C)))}
	defer func() {
		p.freeAll()
		if e := recover(); e != nil {
			if fe, ok := e.(fatal); ok {
				res, err = p.res, fe.err
				return
			}
			panic(e)
		}
	}()
	p.ops(s, d)
	return p.res, nil
}

// fatal carries an allocation or transfer error out of the op sequence.
type fatal struct{ err error }

type pair struct {
	g, c backend.Backend
	r    *rand.Rand
	res  []Result
	live []twin
}

// twin is one tensor held by both backends.
type twin struct{ g, c backend.Buffer }

func (p *pair) must(err error) {
	if err != nil {
		panic(fatal{err})
	}
}

func (p *pair) freeAll() {
	for _, x := range p.live {
		p.g.Free(x.g)
		p.c.Free(x.c)
	}
	p.live = nil
}

func (p *pair) alloc(dt backend.DType, n int) twin {
	g, err := p.g.Alloc(backend.Device, backend.Activations, dt, n)
	p.must(err)
	c, err := p.c.Alloc(backend.Device, backend.Activations, dt, n)
	if err != nil {
		p.g.Free(g)
		p.must(err)
	}
	x := twin{g, c}
	p.live = append(p.live, x)
	return x
}

func (p *pair) set(x twin, vals []float32) {
	p.must(backend.WriteF32(p.g, x.g, vals))
	p.must(backend.WriteF32(p.c, x.c, vals))
}

func (p *pair) normal(dt backend.DType, n int, sd float64) twin {
	x := p.alloc(dt, n)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(p.r.NormFloat64() * sd)
	}
	p.set(x, v)
	return x
}

func (p *pair) positive(n int) twin {
	x := p.alloc(backend.F32, n)
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(p.r.Float64()*0.01 + 1e-4)
	}
	p.set(x, v)
	return x
}

// ints are token ids below bound; few distinct ids, so repeated tokens
// test the encoder's accumulation.
func (p *pair) ints(n, bound int) twin {
	x := p.alloc(backend.I32, n)
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(p.r.IntN(bound))
	}
	p.must(backend.WriteI32(p.g, x.g, v))
	p.must(backend.WriteI32(p.c, x.c, v))
	return x
}

// fail records a failure that is not an elementwise comparison.
func (p *pair) fail(format string, args ...any) {
	p.res = append(p.res, Result{Tensor: "check", Err: fmt.Sprintf(format, args...)})
}

// same compares one output tensor.
func (p *pair) same(name string, x twin) { p.sameWithin(name, x, Tol(x.g.DType())) }

// sameWithin is same with tolerance tol.
func (p *pair) sameWithin(name string, x twin, tol float64) {
	r := Result{Tensor: name, DType: x.g.DType(), Tol: tol}
	defer func() { p.res = append(p.res, r) }()
	if err := p.g.Sync(); err != nil {
		r.Err = err.Error()
		return
	}
	g, err := backend.ReadF32(p.g, x.g)
	p.must(err)
	c, err := backend.ReadF32(p.c, x.c)
	p.must(err)
	var ss float64
	for _, v := range c {
		ss += float64(v) * float64(v)
	}
	rms := math.Sqrt(ss / float64(max(len(c), 1)))
	r.N = len(c)
	for i := range c {
		d := math.Abs(float64(g[i]) - float64(c[i]))
		scale := rms + math.Abs(float64(c[i]))
		e := d / math.Max(scale, 1e-30)
		if math.IsNaN(float64(g[i])) != math.IsNaN(float64(c[i])) {
			e = math.Inf(1)
		}
		if e > r.Tol || math.IsNaN(e) && !math.IsNaN(float64(c[i])) {
			r.Bad++
		}
		if !math.IsNaN(e) {
			r.MaxErr = math.Max(r.MaxErr, e)
		}
	}
}

// ops is the op sequence: a GPT-2 block's forward and backward ops in order,
// then the optimizer, reductions and casts, then the decoder ops.
func (p *pair) ops(s Shape, d DTypes) {
	B, T, C, NH, V, Vp := s.B, s.T, s.C, s.NH, s.V, s.Vp
	N := B * T
	act, par := d.Act, d.Param

	// Encoder.
	inp := p.ints(N, min(V, 7))
	wte, wpe := p.normal(par, Vp*C, 0.1), p.normal(par, T*C, 0.1)
	x := p.alloc(act, N*C)
	p.g.EncoderForward(x.g, inp.g, wte.g, wpe.g, B, T, C)
	p.c.EncoderForward(x.c, inp.c, wte.c, wpe.c, B, T, C)
	p.same("encoder out", x)
	dx := p.normal(act, N*C, 1)
	dwte, dwpe := p.normal(par, Vp*C, 0.1), p.normal(par, T*C, 0.1)
	p.g.EncoderBackward(dwte.g, dwpe.g, dx.g, inp.g, B, T, C)
	p.c.EncoderBackward(dwte.c, dwpe.c, dx.c, inp.c, B, T, C)
	p.same("encoder dwte", dwte)
	p.same("encoder dwpe", dwpe)

	// LayerNorm.
	lw, lb := p.normal(par, C, 1), p.normal(par, C, 0.1)
	ln := p.alloc(act, N*C)
	mean, rstd := p.alloc(backend.F32, N), p.alloc(backend.F32, N)
	p.g.LayerNormForward(ln.g, mean.g, rstd.g, x.g, lw.g, lb.g, N, C)
	p.c.LayerNormForward(ln.c, mean.c, rstd.c, x.c, lw.c, lb.c, N, C)
	p.same("layernorm out", ln)
	p.same("layernorm mean", mean)
	p.same("layernorm rstd", rstd)
	dln := p.normal(act, N*C, 1)
	dlx := p.alloc(act, N*C)
	dlw, dlb := p.normal(par, C, 0.1), p.normal(par, C, 0.1)
	p.g.LayerNormBackward(dlx.g, dlw.g, dlb.g, dln.g, x.g, lw.g, mean.g, rstd.g, N, C)
	p.c.LayerNormBackward(dlx.c, dlw.c, dlb.c, dln.c, x.c, lw.c, mean.c, rstd.c, N, C)
	p.same("layernorm dinp", dlx)
	p.same("layernorm dweight", dlw)
	p.same("layernorm dbias", dlb)

	// The fused residual add + LayerNorm, when got has it, against the
	// reference's two ops.
	if f, ok := p.g.(backend.ResidualLayerNormer); ok {
		res, rln := p.alloc(act, N*C), p.alloc(act, N*C)
		rm, rr := p.alloc(backend.F32, N), p.alloc(backend.F32, N)
		f.ResidualLayerNormForward(res.g, rln.g, rm.g, rr.g, x.g, dx.g, lw.g, lb.g, N, C)
		p.c.Add(res.c, x.c, dx.c, N*C)
		p.c.LayerNormForward(rln.c, rm.c, rr.c, res.c, lw.c, lb.c, N, C)
		p.same("residual+layernorm residual", res)
		p.same("residual+layernorm out", rln)
		p.same("residual+layernorm mean", rm)
		p.same("residual+layernorm rstd", rr)
	}

	// Matmul (the QKV projection).
	OC := 3 * C
	w, bias := p.normal(par, OC*C, 0.05), p.normal(par, OC, 0.1)
	qkv := p.alloc(act, N*OC)
	p.g.MatmulForward(qkv.g, ln.g, w.g, bias.g, N, C, OC)
	p.c.MatmulForward(qkv.c, ln.c, w.c, bias.c, N, C, OC)
	p.same("matmul out", qkv)
	dqkvIn := p.normal(act, N*OC, 1)
	dmi := p.alloc(act, N*C)
	dw, db := p.normal(par, OC*C, 0.01), p.normal(par, OC, 0.01)
	p.g.MatmulBackward(dmi.g, dw.g, db.g, dqkvIn.g, ln.g, w.g, N, C, OC)
	p.c.MatmulBackward(dmi.c, dw.c, db.c, dqkvIn.c, ln.c, w.c, N, C, OC)
	p.same("matmul dinp", dmi)
	p.same("matmul dweight", dw)
	p.same("matmul dbias", db)
	// Without bias: the bias kernels are skipped.
	p.g.MatmulForward(qkv.g, ln.g, w.g, backend.Buffer{}, N, C, OC)
	p.c.MatmulForward(qkv.c, ln.c, w.c, backend.Buffer{}, N, C, OC)
	p.same("matmul out (no bias)", qkv)

	// Attention: GPT-2's (KV = NH) on the projection's output, then grouped
	// key/value heads on fresh input.
	ao, dao := p.attention("attention", qkv, act, B, T, NH, NH, C/NH)
	if kv := groupedKV(NH); kv < NH {
		p.attention("attention gqa", p.normal(act, N*(NH+2*kv)*(C/NH), 1), act, B, T, NH, kv, C/NH)
	}

	// GELU, residual, scale.
	gin := p.normal(act, N*C, 1.5)
	gout := p.alloc(act, N*C)
	p.g.GeluForward(gout.g, gin.g, N*C)
	p.c.GeluForward(gout.c, gin.c, N*C)
	p.same("gelu out", gout)
	gdin := p.alloc(act, N*C)
	p.g.GeluBackward(gdin.g, gin.g, dao.g, N*C)
	p.c.GeluBackward(gdin.c, gin.c, dao.c, N*C)
	p.same("gelu dinp", gdin)
	p.g.Add(gout.g, gout.g, ao.g, N*C)
	p.c.Add(gout.c, gout.c, ao.c, N*C)
	p.same("residual add", gout)
	p.g.Scale(gout.g, -0.37)
	p.c.Scale(gout.c, -0.37)
	p.same("scale", gout)
	gd, gok := p.g.(backend.Dropouter)
	cd, cok := p.c.(backend.Dropouter)
	if gok && cok { // the same mask on both; the inputs agree to act's rounding
		drop := p.alloc(backend.F32, N*C)
		gd.Dropout(drop.g, gout.g, 0.25, 0x5EED, N*C)
		cd.Dropout(drop.c, gout.c, 0.25, 0x5EED, N*C)
		p.sameWithin("dropout", drop, Tol(act))
		gd.Dropout(gout.g, gout.g, 0.5, 7, N*C)
		cd.Dropout(gout.c, gout.c, 0.5, 7, N*C)
		p.same("dropout in place", gout)
	}

	// Cross-entropy over the padded vocabulary.
	logits := p.normal(act, N*Vp, 2)
	targets := p.ints(N, V)
	losses, probs := p.alloc(backend.F32, N), p.alloc(backend.F32, N*Vp)
	p.g.CrossEntropyForward(losses.g, probs.g, logits.g, targets.g, N, V, Vp)
	p.c.CrossEntropyForward(losses.c, probs.c, logits.c, targets.c, N, V, Vp)
	p.same("crossentropy losses", losses)
	p.same("crossentropy probs", probs)
	dlogits := p.alloc(act, N*Vp)
	p.g.CrossEntropyBackward(dlogits.g, probs.g, targets.g, 1/float32(N), N, V, Vp)
	p.c.CrossEntropyBackward(dlogits.c, probs.c, targets.c, 1/float32(N), N, V, Vp)
	p.same("crossentropy dlogits", dlogits)
	// In place, as the model does it in fp32.
	p.g.CrossEntropyBackward(probs.g, probs.g, targets.g, 0.5, N, V, Vp)
	p.c.CrossEntropyBackward(probs.c, probs.c, targets.c, 0.5, N, V, Vp)
	p.same("crossentropy dlogits in place", probs)
	// The fused classifier: losses only, then losses and dlogits in place
	// of the logits, in the activations' dtype.
	fl := p.alloc(backend.F32, N)
	p.g.FusedClassifier(fl.g, logits.g, targets.g, 0, N, V, Vp)
	p.c.FusedClassifier(fl.c, logits.c, targets.c, 0, N, V, Vp)
	p.same("fused classifier losses", fl)
	p.same("fused classifier logits kept", logits)
	p.g.FusedClassifier(fl.g, logits.g, targets.g, 1/float32(N), N, V, Vp)
	p.c.FusedClassifier(fl.c, logits.c, targets.c, 1/float32(N), N, V, Vp)
	p.same("fused classifier losses with dlogits", fl)
	p.same("fused classifier dlogits", logits)
	acc := p.alloc(backend.F32, 1)
	p.g.AddSum(acc.g, fl.g)
	p.c.AddSum(acc.c, fl.c)
	p.g.AddSum(acc.g, losses.g)
	p.c.AddSum(acc.c, losses.c)
	p.same("summed losses", acc)

	// AdamW with and without an fp32 master, then the reductions.
	n := N*C + 3
	param, grad := p.normal(par, n, 0.5), p.normal(par, n, 0.1)
	master := p.alloc(backend.F32, n)
	p.g.Copy(master.g, param.g)
	p.c.Copy(master.c, param.c)
	p.same("copy to master", master)
	m, v := p.normal(backend.F32, n, 0.01), p.positive(n)
	hp := backend.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, GradScale: 0.5, Step: 3}
	p.g.AdamW(param.g, master.g, grad.g, m.g, v.g, hp)
	p.c.AdamW(param.c, master.c, grad.c, m.c, v.c, hp)
	p.same("adamw master", master)
	p.same("adamw param", param)
	p.same("adamw m", m)
	p.same("adamw v", v)
	p.g.AdamW(param.g, backend.Buffer{}, grad.g, m.g, v.g, hp)
	p.c.AdamW(param.c, backend.Buffer{}, grad.c, m.c, v.c, hp)
	p.same("adamw param (no master)", param)

	gs, cs := p.g.SumSquares(grad.g), p.c.SumSquares(grad.c)
	// float64 accumulation in any order: agreement to ~1e-12.
	ss := Result{Tensor: "sum of squares", DType: grad.g.DType(), Tol: 1e-9, N: 1,
		MaxErr: math.Abs(gs-cs) / math.Max(math.Abs(cs), 1e-300)}
	if !(ss.MaxErr <= ss.Tol) {
		ss.Bad = 1
	}
	p.res = append(p.res, ss)
	if p.g.NonFinite(grad.g) {
		p.fail("NonFinite reports finite data as non-finite")
	}
	bad := p.alloc(act, 50)
	vals := make([]float32, 50)
	vals[37] = float32(math.Inf(-1))
	p.set(bad, vals)
	if !p.g.NonFinite(bad.g) {
		p.fail("NonFinite misses an -Inf")
	}
	vals[37], vals[3] = 0, float32(math.NaN())
	p.set(bad, vals)
	if !p.g.NonFinite(bad.g) {
		p.fail("NonFinite misses a NaN")
	}

	// Casts in both directions between the dtypes of this case.
	cast := p.alloc(par, N*C)
	p.g.Copy(cast.g, x.g)
	p.c.Copy(cast.c, x.c)
	p.same("cast act→param", cast)
	p.g.Zero(cast.g)
	p.c.Zero(cast.c)
	p.same("zero", cast)

	p.decoderOps(s, d)
}

// attention compares attention forward and backward over qkv
// (B,T,(NH+2·KV)·HD) and returns out and the dout it used. Each backend's
// backward reads its own out, as in training.
func (p *pair) attention(name string, qkv twin, act backend.DType, B, T, NH, KV, HD int) (out, dout twin) {
	out, lse := p.alloc(act, B*T*NH*HD), p.alloc(backend.F32, B*NH*T)
	p.g.AttentionForward(out.g, lse.g, qkv.g, B, T, NH, KV, HD)
	p.c.AttentionForward(out.c, lse.c, qkv.c, B, T, NH, KV, HD)
	// In 16-bit storage a backend may round the probabilities and dS to
	// the storage dtype before its tensor-core products (backend.go): two
	// more roundings on the way to each result.
	tol := Tol(act)
	if act != backend.F32 {
		tol *= 2
	}
	p.sameWithin(name+" out", out, tol)
	p.same(name+" lse", lse)
	dout = p.normal(act, B*T*NH*HD, 1)
	dqkv := p.alloc(act, B*T*(NH+2*KV)*HD)
	p.g.AttentionBackward(dqkv.g, dout.g, out.g, qkv.g, lse.g, B, T, NH, KV, HD)
	p.c.AttentionBackward(dqkv.c, dout.c, out.c, qkv.c, lse.c, B, T, NH, KV, HD)
	p.sameWithin(name+" dqkv", dqkv, tol)
	return out, dout
}

// groupedKV is the largest proper divisor of NH (1 for a prime NH): the
// key/value head count of a grouped-query variant of the shape.
func groupedKV(NH int) int {
	for kv := NH / 2; kv > 1; kv-- {
		if NH%kv == 0 {
			return kv
		}
	}
	return 1
}
