// Package compare runs every Backend op on two backends with the same
// inputs and reports, per output tensor, how far the results are apart. The
// CUDA backend's tests compare it with the CPU backend this way (kernels
// under emulation), and `gotrain doctor --selftest` does the same on a real
// GPU, printing the table.
//
// Tolerances are by storage dtype, relative to the reference result's RMS
// plus the element's magnitude: a few units in the last place of the
// storage type, since two backends may round one fp32 intermediate
// differently and the rounding to 16 bits amplifies it. Attention at long
// sequences (long.go) sums so many terms that its bound is per element,
// from the magnitudes of those terms (attention_bound.go).
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
	// Worst is the largest |got − want| as a fraction of the element's
	// allowed error: Tol·(rms(want) + |want|), widened for results whose
	// rounding error grows with the terms they sum (attention at long
	// sequences, sameBounded). At most 1 passes.
	Worst  float64
	Bad, N int    // elements over the bound, elements compared
	Err    string // a failure that is not a numeric difference
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
func Run(got, want backend.Backend, s Shape, d DTypes, seed uint64) ([]Result, error) {
	return run(got, want, seed, uint64(s.C), func(p *pair) { p.ops(s, d) })
}

// run runs ops on a pair of got and want whose random inputs come from
// (seed, stream), frees every buffer after, and turns an allocation or
// transfer failure inside ops into the error.
func run(got, want backend.Backend, seed, stream uint64, ops func(*pair)) (res []Result, err error) {
	p := &pair{g: got, c: want, r: rand.New(rand.NewPCG(seed, stream))}
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
	ops(p)
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

// output is an op's result buffer, filled with the same random values on
// both backends rather than left zero: an element a backend never writes
// then differs from the reference's, and no op reads a zero-filled buffer
// (an op that accumulates starts from data, not from zero).
func (p *pair) output(dt backend.DType, n int) twin { return p.normal(dt, n, 1) }

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
func (p *pair) sameWithin(name string, x twin, tol float64) { p.sameBounded(name, x, tol, nil, 0) }

// sameBounded is sameWithin with element i's allowed error widened by
// extra[i] + rel·|want[i]| when extra is not nil: for results whose
// rounding error scales with the terms they sum rather than with the
// result (attentionAllowance).
func (p *pair) sameBounded(name string, x twin, tol float64, extra []float64, rel float64) {
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
		gi, ci := float64(g[i]), float64(c[i])
		d := math.Abs(gi - ci)
		scale := math.Max(rms+math.Abs(ci), 1e-30)
		lim := tol * scale
		if extra != nil {
			lim += extra[i] + rel*math.Abs(ci)
		}
		e, w := d/scale, d/lim
		if math.IsNaN(gi) != math.IsNaN(ci) {
			e, w = math.Inf(1), math.Inf(1)
		}
		if w > 1 || math.IsNaN(w) && !math.IsNaN(ci) {
			r.Bad++
		}
		if !math.IsNaN(e) {
			r.MaxErr = math.Max(r.MaxErr, e)
			r.Worst = math.Max(r.Worst, w)
		}
	}
}

// ops is the op sequence: a GPT-2 block's forward and backward ops in order,
// then the optimizer, reductions and casts, then the decoder ops.
func (p *pair) ops(s Shape, d DTypes) {
	B, T, C, NH := s.B, s.T, s.C, s.NH
	N := B * T
	act := d.Act
	x, dx := p.encoder(s, d)
	ln := p.layerNorm(x, dx, N, C, d)
	qkv := p.matmul(ln, N, C, 3*C, d)

	// Attention: GPT-2's (KV = NH) on the projection's output, then grouped
	// key/value heads on fresh input.
	ao, dao := p.attention("attention", qkv, act, B, T, NH, NH, C/NH)
	if kv := groupedKV(NH); kv < NH {
		p.attention("attention gqa", p.normal(act, N*(NH+2*kv)*(C/NH), 1), act, B, T, NH, kv, C/NH)
	}
	p.pointwise(ao, dao, N*C, act)
	p.classifier(N, s.V, s.Vp, act)
	p.optimizer(N*C+3, d)

	// Casts in both directions between the dtypes of this case.
	cast := p.output(d.Param, N*C)
	p.g.Copy(cast.g, x.g)
	p.c.Copy(cast.c, x.c)
	p.same("cast act→param", cast)
	p.g.Zero(cast.g)
	p.c.Zero(cast.c)
	p.same("zero", cast)

	p.decoderOps(s, d)
}

// encoder compares the embedding lookup and its backward and returns the
// lookup's output and a gradient of it.
func (p *pair) encoder(s Shape, d DTypes) (x, dx twin) {
	B, T, C, V, Vp := s.B, s.T, s.C, s.V, s.Vp
	N := B * T
	act, par := d.Act, d.Param
	inp := p.ints(N, min(V, 7))
	wte, wpe := p.normal(par, Vp*C, 0.1), p.normal(par, T*C, 0.1)
	x = p.output(act, N*C)
	p.g.EncoderForward(x.g, inp.g, wte.g, wpe.g, B, T, C)
	p.c.EncoderForward(x.c, inp.c, wte.c, wpe.c, B, T, C)
	p.same("encoder out", x)
	dx = p.normal(act, N*C, 1)
	dwte, dwpe := p.normal(par, Vp*C, 0.1), p.normal(par, T*C, 0.1)
	p.g.EncoderBackward(dwte.g, dwpe.g, dx.g, inp.g, B, T, C)
	p.c.EncoderBackward(dwte.c, dwpe.c, dx.c, inp.c, B, T, C)
	p.same("encoder dwte", dwte)
	p.same("encoder dwpe", dwpe)
	return x, dx
}

// layerNorm compares LayerNorm forward and backward over x (N, C), and
// the fused residual add + LayerNorm of x and dx when got has it, and
// returns the forward's output.
func (p *pair) layerNorm(x, dx twin, N, C int, d DTypes) twin {
	act, par := d.Act, d.Param
	lw, lb := p.normal(par, C, 1), p.normal(par, C, 0.1)
	ln := p.output(act, N*C)
	mean, rstd := p.output(backend.F32, N), p.output(backend.F32, N)
	p.g.LayerNormForward(ln.g, mean.g, rstd.g, x.g, lw.g, lb.g, N, C)
	p.c.LayerNormForward(ln.c, mean.c, rstd.c, x.c, lw.c, lb.c, N, C)
	p.same("layernorm out", ln)
	p.same("layernorm mean", mean)
	p.same("layernorm rstd", rstd)
	dln := p.normal(act, N*C, 1)
	dlx := p.output(act, N*C)
	dlw, dlb := p.normal(par, C, 0.1), p.normal(par, C, 0.1)
	p.g.LayerNormBackward(dlx.g, dlw.g, dlb.g, dln.g, x.g, lw.g, mean.g, rstd.g, N, C)
	p.c.LayerNormBackward(dlx.c, dlw.c, dlb.c, dln.c, x.c, lw.c, mean.c, rstd.c, N, C)
	p.same("layernorm dinp", dlx)
	p.same("layernorm dweight", dlw)
	p.same("layernorm dbias", dlb)

	// The fused residual add + LayerNorm, when got has it, against the
	// reference's two ops.
	if f, ok := p.g.(backend.ResidualLayerNormer); ok {
		res, rln := p.output(act, N*C), p.output(act, N*C)
		rm, rr := p.output(backend.F32, N), p.output(backend.F32, N)
		f.ResidualLayerNormForward(res.g, rln.g, rm.g, rr.g, x.g, dx.g, lw.g, lb.g, N, C)
		p.c.Add(res.c, x.c, dx.c, N*C)
		p.c.LayerNormForward(rln.c, rm.c, rr.c, res.c, lw.c, lb.c, N, C)
		p.same("residual+layernorm residual", res)
		p.same("residual+layernorm out", rln)
		p.same("residual+layernorm mean", rm)
		p.same("residual+layernorm rstd", rr)
	}
	return ln
}

// matmul compares the linear layer in (N, C) → (N, OC) with and without a
// bias, forward and backward, and returns its output.
func (p *pair) matmul(ln twin, N, C, OC int, d DTypes) twin {
	act, par := d.Act, d.Param
	w, bias := p.normal(par, OC*C, 0.05), p.normal(par, OC, 0.1)
	qkv := p.output(act, N*OC)
	p.g.MatmulForward(qkv.g, ln.g, w.g, bias.g, N, C, OC)
	p.c.MatmulForward(qkv.c, ln.c, w.c, bias.c, N, C, OC)
	p.same("matmul out", qkv)
	dqkvIn := p.normal(act, N*OC, 1)
	dmi := p.output(act, N*C)
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
	return qkv
}

// pointwise compares GELU, the residual add, scaling and dropout over n
// elements, starting from the attention's output ao and gradient dao.
func (p *pair) pointwise(ao, dao twin, n int, act backend.DType) {
	gin := p.normal(act, n, 1.5)
	gout := p.output(act, n)
	p.g.GeluForward(gout.g, gin.g, n)
	p.c.GeluForward(gout.c, gin.c, n)
	p.same("gelu out", gout)
	gdin := p.output(act, n)
	p.g.GeluBackward(gdin.g, gin.g, dao.g, n)
	p.c.GeluBackward(gdin.c, gin.c, dao.c, n)
	p.same("gelu dinp", gdin)
	p.g.Add(gout.g, gout.g, ao.g, n)
	p.c.Add(gout.c, gout.c, ao.c, n)
	p.same("residual add", gout)
	p.g.Scale(gout.g, -0.37)
	p.c.Scale(gout.c, -0.37)
	p.same("scale", gout)
	gd, gok := p.g.(backend.Dropouter)
	cd, cok := p.c.(backend.Dropouter)
	if gok && cok { // the same mask on both; the inputs agree to act's rounding
		drop := p.output(backend.F32, n)
		gd.Dropout(drop.g, gout.g, 0.25, 0x5EED, n)
		cd.Dropout(drop.c, gout.c, 0.25, 0x5EED, n)
		p.sameWithin("dropout", drop, Tol(act))
		gd.Dropout(gout.g, gout.g, 0.5, 7, n)
		cd.Dropout(gout.c, gout.c, 0.5, 7, n)
		p.same("dropout in place", gout)
	}
}

// optimizer compares AdamW with and without an fp32 master over n
// elements, then the reductions SumSquares and NonFinite.
func (p *pair) optimizer(n int, d DTypes) {
	par, act := d.Param, d.Act
	param, grad := p.normal(par, n, 0.5), p.normal(par, n, 0.1)
	master := p.output(backend.F32, n)
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
	ss.Worst = ss.MaxErr / ss.Tol
	if !(ss.MaxErr <= ss.Tol) {
		ss.Bad = 1
	}
	p.res = append(p.res, ss)
	if p.g.NonFinite(grad.g) {
		p.fail("NonFinite reports finite data as non-finite")
	}
	bad := p.alloc(act, 50)
	vals := make([]float32, 50)
	for i := range vals {
		vals[i] = float32(p.r.NormFloat64())
	}
	fin := vals[37]
	vals[37] = float32(math.Inf(-1))
	p.set(bad, vals)
	if !p.g.NonFinite(bad.g) {
		p.fail("NonFinite misses an -Inf")
	}
	vals[37], vals[3] = fin, float32(math.NaN())
	p.set(bad, vals)
	if !p.g.NonFinite(bad.g) {
		p.fail("NonFinite misses a NaN")
	}
}

// attention compares attention forward and backward over qkv
// (B,T,(NH+2·KV)·HD) and returns out and the dout it used. Each backend's
// backward reads its own out, as in training.
func (p *pair) attention(name string, qkv twin, act backend.DType, B, T, NH, KV, HD int) (out, dout twin) {
	out, lse := p.output(act, B*T*NH*HD), p.output(backend.F32, B*NH*T)
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
	dqkv := p.output(act, B*T*(NH+2*KV)*HD)
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

// classifier compares the cross-entropy ops and the fused classifier over
// N rows of a vocabulary of V ids padded to Vp columns, logits in act.
func (p *pair) classifier(N, V, Vp int, act backend.DType) {
	logits := p.normal(act, N*Vp, 2)
	targets := p.ints(N, V)
	// Cross-entropy over the padded vocabulary.
	losses, probs := p.output(backend.F32, N), p.output(backend.F32, N*Vp)
	p.g.CrossEntropyForward(losses.g, probs.g, logits.g, targets.g, N, V, Vp)
	p.c.CrossEntropyForward(losses.c, probs.c, logits.c, targets.c, N, V, Vp)
	p.same("crossentropy losses", losses)
	p.same("crossentropy probs", probs)
	dlogits := p.output(act, N*Vp)
	p.g.CrossEntropyBackward(dlogits.g, probs.g, targets.g, 1/float32(N), N, V, Vp)
	p.c.CrossEntropyBackward(dlogits.c, probs.c, targets.c, 1/float32(N), N, V, Vp)
	p.same("crossentropy dlogits", dlogits)
	// In place, as the model does it in fp32.
	p.g.CrossEntropyBackward(probs.g, probs.g, targets.g, 0.5, N, V, Vp)
	p.c.CrossEntropyBackward(probs.c, probs.c, targets.c, 0.5, N, V, Vp)
	p.same("crossentropy dlogits in place", probs)
	// The fused classifier: losses only, then losses and dlogits in place
	// of the logits, in the activations' dtype.
	fl := p.output(backend.F32, N)
	p.g.FusedClassifier(fl.g, logits.g, targets.g, 0, N, V, Vp)
	p.c.FusedClassifier(fl.c, logits.c, targets.c, 0, N, V, Vp)
	p.same("fused classifier losses", fl)
	p.same("fused classifier logits kept", logits)
	p.g.FusedClassifier(fl.g, logits.g, targets.g, 1/float32(N), N, V, Vp)
	p.c.FusedClassifier(fl.c, logits.c, targets.c, 1/float32(N), N, V, Vp)
	p.same("fused classifier losses with dlogits", fl)
	p.same("fused classifier dlogits", logits)
	acc := p.output(backend.F32, 1)
	p.g.AddSum(acc.g, fl.g)
	p.c.AddSum(acc.c, fl.c)
	p.g.AddSum(acc.g, losses.g)
	p.c.AddSum(acc.c, losses.c)
	p.same("summed losses", acc)
}
