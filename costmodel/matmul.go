package costmodel

import "github.com/gotrain/gotrain/backend"

// gemmOps mirrors backend/cuda's GEMM operands (matmul.go): a product of
// two BF16 inputs runs on the tensor cores as stored; any other mix widens
// each input that is not F32 into fp32 scratch, once per op, and runs a
// true-fp32 GEMM on the CUDA cores. A result cuBLAS cannot write (bf16 from
// fp32 inputs, fp16) goes through fp32 scratch and a Cast.
type gemmOps struct {
	v       view
	widened map[string]bool
	parts   []Part
}

func newGemmOps(v view) *gemmOps { return &gemmOps{v: v, widened: map[string]bool{}} }

// inputs returns the unit a product of arguments a and b runs on and the
// bytes its GEMM reads for them, adding the widening casts it needs.
func (g *gemmOps) inputs(a, b string) (u Unit, aBytes, bBytes float64) {
	if g.v.dt(a) == backend.BF16 && g.v.dt(b) == backend.BF16 {
		return TensorBF16, g.v.bytes(a), g.v.bytes(b)
	}
	return CUDACores, g.f32(a), g.f32(b)
}

// f32 is the bytes of argument name as fp32, widening it once if needed.
func (g *gemmOps) f32(name string) float64 {
	if !g.v.has(name) {
		return 0
	}
	n := g.v.len(name)
	if dt := g.v.dt(name); dt != backend.F32 && !g.widened[name] {
		g.widened[name] = true
		g.parts = append(g.parts, cast(name+" to fp32", n, dt, backend.F32))
	}
	return 4 * float64(n)
}

// writable reports whether cuBLAS writes a result of dt from inputs on u.
func writable(dt backend.DType, u Unit) bool {
	return dt == backend.F32 || (u == TensorBF16 && dt == backend.BF16)
}

// gemm adds one GEMM of m×n×k multiply-adds reading aBytes and bBytes and
// writing cBytes (reading them first when it adds onto C).
func (g *gemmOps) gemm(name string, u Unit, m, n, k int, aBytes, bBytes, cBytes float64, addC bool) {
	c := cBytes
	if addC {
		c *= 2
	}
	g.parts = append(g.parts, Part{Name: "GEMM " + name, Unit: u, FLOPs: 2 * float64(m) * float64(n) * float64(k),
		Bytes: aBytes + bBytes + c, Calls: 1})
}

// matmulForward: out (N,OC) = inp·weightᵀ + bias. With a bias that out's
// dtype holds, a kernel writes the bias into out and the GEMM adds onto it;
// otherwise the GEMM writes fp32 scratch and a kernel adds the bias and
// rounds.
func matmulForward(v view) []Part {
	N, C, OC := v.dim("N"), v.dim("C"), v.dim("OC")
	g := newGemmOps(v)
	u, xb, wb := g.inputs("inp", "weight")
	odt, bias := v.dt("out"), v.has("bias")
	nout := float64(N * OC)
	switch {
	case writable(odt, u) && !bias:
		g.gemm("out", u, N, OC, C, xb, wb, v.bytes("out"), false)
	case writable(odt, u) && (odt == backend.F32 || v.dt("bias") == odt):
		g.parts = append(g.parts, Part{Name: "kernel bias into out", Unit: CUDACores, Calls: 1,
			Bytes: v.bytes("bias") + v.bytes("out")})
		g.gemm("out += inp·weightᵀ", u, N, OC, C, xb, wb, v.bytes("out"), true)
	default:
		g.gemm("fp32 scratch", u, N, OC, C, xb, wb, 4*nout, false)
		g.parts = append(g.parts, Part{Name: "kernel bias and round", Unit: CUDACores, FLOPs: nout, Calls: 1,
			Bytes: 4*nout + v.bytes("bias") + v.bytes("out")})
	}
	return g.parts
}

// matmulBackward: dbias by column partials and a reduction, dinp = dout·W
// (beta 0), dweight += doutᵀ·inp (beta 1).
func matmulBackward(v view) []Part {
	N, C, OC := v.dim("N"), v.dim("C"), v.dim("OC")
	g := newGemmOps(v)
	if v.has("dbias") && N > 0 && OC > 0 {
		g.parts = append(g.parts,
			Part{Name: "kernel dbias partial", Unit: CUDACores, FLOPs: float64(N * OC), Bytes: v.bytes("dout"), Calls: 1},
			Part{Name: "kernel dbias reduce", Unit: CUDACores, Bytes: 2 * v.bytes("dbias"), Calls: 1})
	}
	if v.has("dinp") && N > 0 && C > 0 {
		u, db, wb := g.inputs("dout", "weight")
		if dt := v.dt("dinp"); writable(dt, u) {
			g.gemm("dinp", u, N, C, OC, db, wb, v.bytes("dinp"), false)
		} else {
			g.gemm("dinp (fp32 scratch)", u, N, C, OC, db, wb, 4*float64(N*C), false)
			g.parts = append(g.parts, cast("dinp", N*C, backend.F32, dt))
		}
	}
	if v.has("dweight") && N > 0 && OC > 0 && C > 0 { // none for a frozen weight
		u, db, xb := g.inputs("dout", "inp")
		if dt := v.dt("dweight"); writable(dt, u) {
			g.gemm("dweight", u, OC, C, N, db, xb, v.bytes("dweight"), true)
		} else {
			g.gemm("dweight (fp32 scratch)", u, OC, C, N, db, xb, 4*float64(OC*C), true)
			g.parts = append(g.parts, cast("dweight to fp32", OC*C, dt, backend.F32), cast("dweight back", OC*C, backend.F32, dt))
		}
	}
	return g.parts
}
