package costmodel

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/attnplan"
)

// Attention on backend/cuda (attention.go there) runs cuBLAS strided-batched
// GEMMs over chunks of query rows with kernels between them: forward per
// chunk S = scale·Q·Kᵀ, a causal softmax kernel, O = P·V; backward per
// chunk S and dP = dO·Vᵀ, a kernel for P and dS, then dV, dK and dQ. A
// chunk of rows [r0, r1) multiplies only keys 0 … r1−1, so the GEMMs do
// Σ_chunks rows·r1 of the T² (query, key) pairs: half of them plus half a
// chunk per chunk. Scores are fp32 in device memory (this is not a fused
// kernel): the score-sized reads and writes, not the FLOPs, set the time.
// The strided batch spans the larger of B and KV, so each GEMM is
// min(B, KV) calls.

// plan sets the rows per chunk as backend/cuda plans them (package
// attnplan) and reports whether dK and dV accumulate in fp32 rather than in
// dqkv, of dtype dqDT (forward plans with qkv's dtype, as the backend does).
func (a *attShape) plan(dqDT backend.DType) (acc bool) {
	p := attnplan.New(a.B, a.T, a.NH, a.KV, a.HD, dqDT, a.gdt, attnplan.Budget)
	a.rows = p.Rows
	return p.AccBytes > 0
}

// attShape is one traced attention call as the CUDA backend plans it.
type attShape struct {
	B, T, NH, KV, HD, G int
	gdt                 backend.DType // GEMM operand type
	unit                Unit
	rows                int
	calls               int // GEMM calls per product: min(B, KV)
}

func newAttShape(v view, inputs ...string) attShape {
	a := attShape{B: v.dim("B"), T: v.dim("T"), NH: v.dim("NH"), KV: v.dim("KV"), HD: v.dim("HD"),
		gdt: backend.BF16, unit: TensorBF16}
	a.G = a.NH / max(a.KV, 1)
	for _, in := range inputs {
		if v.dt(in) != backend.BF16 {
			a.gdt, a.unit = backend.F32, CUDACores
		}
	}
	a.calls = min(a.B, a.KV)
	return a
}

// chunks calls fn(rows, cols) for every chunk of the call.
func (a attShape) chunks(fn func(rows, cols int)) {
	for r0 := 0; r0 < a.T; r0 += a.rows {
		rows := min(a.rows, a.T-r0)
		fn(rows, r0+rows)
	}
}

// resultType is what a GEMM on a.gdt operands writes for a destination of
// dtype dt: dt when cuBLAS can, else fp32 to be cast.
func (a attShape) resultType(dt backend.DType) backend.DType {
	if writable(dt, a.unit) {
		return dt
	}
	return backend.F32
}

func (a attShape) gemm(name string, flops, bytes float64) Part {
	return Part{Name: "GEMM " + name, Unit: a.unit, FLOPs: flops, Bytes: bytes, Calls: a.calls}
}

func attentionForward(v view) []Part {
	a := newAttShape(v, "qkv")
	if a.B*a.T == 0 {
		return nil
	}
	var parts []Part
	if dt := v.dt("qkv"); dt != a.gdt {
		parts = append(parts, cast("qkv", v.len("qkv"), dt, a.gdt))
	}
	a.plan(v.dt("qkv"))
	gs, odt := sizeOf(a.gdt), a.resultType(v.dt("out"))
	directO := a.G == 1 && odt == v.dt("out")
	var gather, s, softmax, pv, scatter Part
	a.chunks(func(rows, cols int) {
		q := float64(a.B * a.NH * rows * a.HD) // query (and output) elements of the chunk
		cells := float64(a.B*a.NH*rows) * float64(cols)
		kv := float64(a.B * a.KV * cols * a.HD) // key (value) elements read
		flops := 2 * cells * float64(a.HD)
		if a.G > 1 {
			gather.add(Part{Bytes: q * (gs + v.size("qkv")), Calls: 1})
		}
		s.add(a.gemm("", flops, q*gs+kv*gs+4*cells))
		softmax.add(Part{FLOPs: 6 * cells, Bytes: cells * (4 + gs), Calls: 1})
		pv.add(a.gemm("", flops, cells*gs+kv*gs+q*sizeOf(odt)))
		if !directO {
			scatter.add(Part{Bytes: q * (sizeOf(odt) + v.size("out")), Calls: 1})
		}
	})
	parts = append(parts, gather.named("kernel attention gather q", CUDACores), s.named("GEMM S = scale·Q·Kᵀ", a.unit),
		softmax.named("kernel attention softmax", CUDACores), pv.named("GEMM O = P·V", a.unit),
		scatter.named("kernel attention scatter out", CUDACores))
	return nonEmpty(parts)
}

func attentionBackward(v view) []Part {
	a := newAttShape(v, "qkv", "dout")
	if a.B*a.T == 0 {
		return nil
	}
	var parts []Part
	if dt := v.dt("qkv"); dt != a.gdt {
		parts = append(parts, cast("qkv", v.len("qkv"), dt, a.gdt))
	}
	dqdt := v.dt("dqkv")
	ddt := a.resultType(dqdt)
	directDO := a.G == 1 && v.dt("dout") == a.gdt
	directDQ := a.G == 1 && ddt == dqdt
	acc := a.plan(dqdt)
	kvAll := float64(a.B * a.KV * a.T * a.HD)
	gs := sizeOf(a.gdt)
	// dK and dV are read and written by every chunk but the first.
	dkvSize := sizeOf(dqdt)
	if acc {
		dkvSize = 4
	}
	var gather, s, dp, dsoft, dv, dk, dq, scatter Part
	first := true
	a.chunks(func(rows, cols int) {
		q := float64(a.B * a.NH * rows * a.HD)
		cells := float64(a.B*a.NH*rows) * float64(cols)
		kv := float64(a.B * a.KV * cols * a.HD)
		flops := 2 * cells * float64(a.HD)
		g := Part{FLOPs: 2 * q, Bytes: q * (v.size("dout") + v.size("out")), Calls: 1} // D = rowsum(dO∘O)
		if a.G > 1 {
			g.Bytes += q * (v.size("qkv") + gs)
		}
		if !directDO {
			g.Bytes += q * gs
		}
		gather.add(g)
		s.add(a.gemm("", flops, q*gs+kv*gs+4*cells))
		dp.add(a.gemm("", flops, q*gs+kv*gs+4*cells))
		dsoft.add(Part{FLOPs: 4 * cells, Bytes: cells * (8 + 2*gs), Calls: 1})
		rw := 2.0
		if first {
			rw = 1 // the first chunk (the last rows) writes every key with beta 0
		}
		dv.add(a.gemm("", flops, cells*gs+q*gs+rw*kv*dkvSize))
		dk.add(a.gemm("", flops, cells*gs+q*gs+rw*kv*dkvSize))
		dq.add(a.gemm("", flops, cells*gs+kv*gs+q*sizeOf(ddt)))
		if !directDQ {
			scatter.add(Part{Bytes: q * (sizeOf(ddt) + sizeOf(dqdt)), Calls: 1})
		}
		first = false
	})
	if acc {
		scatter.add(Part{Bytes: 2 * kvAll * (4 + sizeOf(dqdt)), Calls: 2})
	}
	parts = append(parts, gather.named("kernel attention gather (D, q, dout)", CUDACores),
		s.named("GEMM S = scale·Q·Kᵀ", a.unit), dp.named("GEMM dP = dO·Vᵀ", a.unit),
		dsoft.named("kernel attention P, dS", CUDACores), dv.named("GEMM dV += Pᵀ·dO", a.unit),
		dk.named("GEMM dK += scale·dSᵀ·Q", a.unit), dq.named("GEMM dQ = scale·dS·K", a.unit),
		scatter.named("kernel attention scatter dq, dk, dv", CUDACores))
	return nonEmpty(parts)
}

// add accumulates q into p.
func (p *Part) add(q Part) {
	p.FLOPs += q.FLOPs
	p.Bytes += q.Bytes
	p.Calls += q.Calls
}

func (p Part) named(name string, u Unit) Part {
	p.Name, p.Unit = name, u
	return p
}

func nonEmpty(parts []Part) []Part {
	out := parts[:0]
	for _, p := range parts {
		if p.Calls > 0 {
			out = append(out, p)
		}
	}
	return out
}
