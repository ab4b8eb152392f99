package cuda

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/kernels"
)

// GEMMs run on cuBLAS, which takes fp32 operands, or bf16 operands with a
// bf16 or fp32 result, always accumulating in fp32. A product whose two
// inputs are BF16 uses them as stored; any other mix (fp16, or bf16 next to
// fp32) widens the inputs that are not F32 into fp32 scratch, so every
// product is the fp32 product of the stored values, as on the CPU backend.
// A result cuBLAS cannot write (fp16, or bf16 from fp32 inputs) goes
// through fp32 scratch and is rounded once on the way back.

// gemmArgs lends the operands of one op's GEMMs, widening an input to F32
// at most once, and releases every scratch it took.
type gemmArgs struct {
	b        *Backend
	op       string
	wide     map[kernels.Tensor]kernels.Tensor
	releases []func()
	failed   bool // a scratch could not be had: the op queues nothing more (Sync reports it)
}

func (b *Backend) gemmArgs(op string) *gemmArgs {
	return &gemmArgs{b: b, op: op, wide: make(map[kernels.Tensor]kernels.Tensor)}
}

// release returns the scratch; call it after the op's work is queued.
func (g *gemmArgs) release() {
	for _, r := range g.releases {
		r()
	}
}

func (g *gemmArgs) scratch(n int) kernels.Tensor {
	t, release, ok := g.b.scratch(kernels.F32, n)
	g.failed = g.failed || !ok
	g.releases = append(g.releases, release)
	return t
}

// f32 is t (n elements) as F32: t itself, or a widened copy.
func (g *gemmArgs) f32(t kernels.Tensor, n int) kernels.Tensor {
	if t.DT == kernels.F32 {
		return t
	}
	if w, ok := g.wide[t]; ok {
		return w
	}
	w := g.scratch(n)
	if g.failed {
		return w
	}
	g.b.check(g.op, g.b.k.Cast(g.b.stream, w, t, n))
	g.wide[t] = w
	return w
}

// inputs returns a product's two inputs (na and nb elements) in types
// cuBLAS takes, and whether they are BF16.
func (g *gemmArgs) inputs(a, b kernels.Tensor, na, nb int) (kernels.Tensor, kernels.Tensor, bool) {
	if a.DT == kernels.BF16 && b.DT == kernels.BF16 {
		return a, b, true
	}
	return g.f32(a, na), g.f32(b, nb), false
}

// writable reports whether cuBLAS can write a result of c's dtype from
// inputs that are BF16 (bf16) or F32.
func writable(c kernels.Tensor, bf16 bool) bool {
	return c.DT == kernels.F32 || (bf16 && c.DT == kernels.BF16)
}

// gemm queues the row-major product c (m×n) = alpha·op(a)·op(b) + beta·c
// with row strides lda, ldb, ldc.
func (g *gemmArgs) gemm(ta, tb cublas.Op, m, n, k int, a kernels.Tensor, lda int, b kernels.Tensor, ldb int,
	beta float32, c kernels.Tensor, ldc int) {
	mat := func(t kernels.Tensor, ld int) cublas.Matrix {
		typ := cublas.R32F
		if t.DT == kernels.BF16 {
			typ = cublas.R16BF
		}
		return cublas.Matrix{Ptr: t.Ptr, Type: typ, LD: max(1, ld)}
	}
	if g.failed {
		return
	}
	g.b.check(g.op, g.b.gemm(func(h *cublas.Handle) error {
		return h.GemmRowMajor(ta, tb, m, n, k, 1, mat(a, lda), mat(b, ldb), beta, mat(c, ldc), g.b.compute(a.DT))
	}))
}

// MatmulForward implements backend.Backend: out = inp·weightᵀ + bias as
// one GEMM. With cuBLASLt and a bias of out's dtype, the GEMM's epilogue
// adds the bias. Without cuBLASLt (or an algorithm of it for the shape), the bias is written into out first and
// the GEMM adds onto it (beta = 1) when out's dtype holds the bias exactly
// and cuBLAS can write it. Otherwise the GEMM writes fp32 scratch and one
// pass adds the bias and rounds.
func (b *Backend) MatmulForward(out, inp, weight, bias backend.Buffer, N, C, OC int) {
	const op = "matmul forward"
	if b.hostOp(op, out, inp, weight, bias) {
		b.host.MatmulForward(out, inp, weight, bias, N, C, OC)
		return
	}
	needLen(op, "out", out, N*OC)
	needLen(op, "inp", inp, N*C)
	needLen(op, "weight", weight, OC*C)
	var bt kernels.Tensor // Ptr 0: no bias
	if !bias.IsNil() {
		needLen(op, "bias", bias, OC)
		bt = b.t(op, bias)
	}
	if N == 0 || OC == 0 {
		return
	}
	g := b.gemmArgs(op)
	defer g.release()
	o := b.t(op, out)
	x, w, bf16 := g.inputs(b.t(op, inp), b.t(op, weight), N*C, OC*C)
	product := func(c kernels.Tensor, beta float32) {
		g.gemm(cublas.NoTrans, cublas.Trans, N, OC, C, x, C, w, C, beta, c, OC)
	}
	lt := func() bool {
		return b.lt != nil && writable(o, bf16) && bt.DT == o.DT && ltAligned(bt) && !g.failed &&
			b.ltLinear(op, o, kernels.Tensor{}, x, w, bt, false, N, C, OC)
	}
	switch {
	case writable(o, bf16) && bt.Ptr == 0:
		product(o, 0)
	case lt():
		// One GEMM whose epilogue added the bias.
	case writable(o, bf16) && (o.DT == kernels.F32 || bt.DT == o.DT):
		b.check(op, b.k.MatmulEpilogue(b.stream, o, kernels.Tensor{}, bt, N, OC))
		product(o, 1)
	default:
		acc := g.scratch(N * OC)
		if g.failed {
			return
		}
		product(acc, 0)
		b.check(op, b.k.MatmulEpilogue(b.stream, o, acc, bt, N, OC))
	}
}

// MatmulBackward implements backend.Backend with two GEMMs (dinp = dout·W
// with beta = 0, dweight += doutᵀ·inp with beta = 1) and a deterministic
// two-pass column sum for dbias; a zero dweight (a frozen weight) skips its
// GEMM.
func (b *Backend) MatmulBackward(dinp, dweight, dbias, dout, inp, weight backend.Buffer, N, C, OC int) {
	const op = "matmul backward"
	if b.hostOp(op, dinp, dweight, dbias, dout, inp, weight) {
		b.host.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
		return
	}
	needLen(op, "dout", dout, N*OC)
	needLen(op, "inp", inp, N*C)
	needLen(op, "weight", weight, OC*C)
	if !dweight.IsNil() {
		needLen(op, "dweight", dweight, OC*C)
	}
	if !dinp.IsNil() {
		needLen(op, "dinp", dinp, N*C)
	}
	if !dbias.IsNil() {
		needLen(op, "dbias", dbias, OC)
	}
	g := b.gemmArgs(op)
	defer g.release()
	d := b.t(op, dout)

	if !dbias.IsNil() && N > 0 && OC > 0 {
		partial := g.scratch(kernels.MatmulDbiasPartialLen(N, OC))
		if g.failed {
			return
		}
		b.check(op, b.k.MatmulDbiasPartial(b.stream, partial, d, N, OC))
		b.check(op, b.k.MatmulDbiasReduce(b.stream, b.t(op, dbias), partial, N, OC))
	}
	if !dinp.IsNil() && N > 0 && C > 0 {
		di := b.t(op, dinp)
		dd, w, bf16 := g.inputs(d, b.t(op, weight), N*OC, OC*C)
		c := di
		if !writable(di, bf16) {
			c = g.scratch(N * C)
		}
		g.gemm(cublas.NoTrans, cublas.NoTrans, N, C, OC, dd, OC, w, C, 0, c, C)
		if g.failed {
			return
		}
		if c != di {
			b.check(op, b.k.Cast(b.stream, di, c, N*C))
		}
	}
	if !dweight.IsNil() && N > 0 && OC > 0 && C > 0 {
		dw := b.t(op, dweight)
		dd, x, bf16 := g.inputs(d, b.t(op, inp), N*OC, N*C)
		c := dw
		if !writable(dw, bf16) {
			c = g.f32(dw, OC*C)
		}
		g.gemm(cublas.Trans, cublas.NoTrans, OC, C, N, dd, OC, x, C, 1, c, C)
		if g.failed {
			return
		}
		if c != dw {
			b.check(op, b.k.Cast(b.stream, dw, c, OC*C))
		}
	}
}
