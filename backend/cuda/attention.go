package cuda

import (
	"math"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/attnplan"
	"github.com/gotrain/gotrain/cublas"
	cu "github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/kernels"
)

// Attention runs on the tensor cores through cuBLAS strided-batched GEMMs
// (bf16 operands with fp32 accumulation; true fp32 for fp32 activations,
// so results match the CPU), over chunks of query rows, with the kernels
// of attention.cu between them. Forward, per chunk of rows [r0, r1):
//
//	S = scale·Q·Kᵀ (keys 0 … r1−1 only)   GEMM, fp32 scores
//	P = causal softmax(S), lse             kernel (P rounded to bf16 on the bf16 path)
//	O = P·V                                GEMM
//
// and only O and lse are kept. Backward recomputes S chunk by chunk, last
// chunk first:
//
//	S = scale·Q·Kᵀ, dP = dO·Vᵀ             GEMMs
//	P = e^(S−lse), dS = P∘(dP − D)         kernel, D = rowsum(dO∘O) gathered per chunk
//	dV += Pᵀ·dO, dK += scale·dSᵀ·Q         GEMMs (beta 0 on the first, which covers every key)
//	dQ = scale·dS·K                        GEMM
//
// Skipping the keys after each chunk's last row makes causal attention
// cost about half of the full product (plus half a chunk per chunk).
//
// Layout: the query heads of one key/value head sit side by side in a
// chunk's rows, so one GEMM serves the group and sums its dK, dV over the
// group's heads in its own reduction (no atomics, the same bits every
// run). K and V are read in place from qkv: a head's rows are a matrix of
// row stride (NH+2·KV)·HD, and a strided batch over heads steps HD along
// the row. Queries (and output gradients) of a group are not one strided
// matrix in qkv (token stride (NH+2·KV)·HD, head stride HD), so with
// grouped heads a kernel gathers a chunk's into a contiguous buffer first
// (B·NH·rows·HD elements, cheap next to the GEMMs); with one query head
// per key/value head (GPT-2) they too are read in place, and the output
// and query gradient are written in place. A strided batch spans one of
// (batch row, key/value head): the GEMMs loop over the smaller count.
//
// Workspace: package attnplan chooses the chunk's rows, the most that fit
// the budget at the per-row cost of backward's worst case, so the
// workspace is bounded whatever T is (given room for one row). dK and dV
// accumulate over chunks in fp32: in dqkv itself when it is fp32,
// otherwise (a bf16 dqkv over several chunks, or an fp16 one, which cuBLAS
// cannot write) in fp32 accumulators of B·KV·T·HD each, set aside from the
// budget first, as FlashAttention-2 keeps dQ. Forward plans as backward does, so the
// two borrow one scratch block of the same size. Activations cuBLAS cannot
// take as they are (fp16, or a mix of bf16 and fp32) are widened to fp32
// whole, as the matmul does: that scratch is not part of the budget.

// attentionBudget is the default workspace budget of one attention call.
const attentionBudget = attnplan.Budget

// AttentionPlan is how the backend runs an attention call: query chunks
// of Rows rows, Chunks of them, and whether backward accumulates dK and dV
// across the chunks in fp32 scratch (FP32Accumulators) rather than in
// dqkv itself. doctor --selftest reports it, and checks that its long
// sequences take the multi-chunk path.
type AttentionPlan struct {
	Rows, Chunks     int
	FP32Accumulators bool
}

// AttentionPlan is the plan of attention forward and backward at (B, T,
// NH, KV, HD) with qkv, dout and dqkv in dt, as training stores them.
func (b *Backend) AttentionPlan(B, T, NH, KV, HD int, dt backend.DType) AttentionPlan {
	p := attnplan.New(B, T, NH, KV, HD, dt, backend.DType(gemmType(kernels.DType(dt))), attentionBudget)
	return AttentionPlan{Rows: p.Rows, Chunks: p.Chunks, FP32Accumulators: p.AccBytes > 0}
}

// attentionDims panics unless the attention shapes agree: NH a positive
// multiple of KV, qkv (B,T,(NH+2·KV)·HD), out (B,T,NH·HD) and lse
// (B,NH,T) in F32.
func attentionDims(op string, out, lse, qkv backend.Buffer, B, T, NH, KV, HD int) {
	if B < 0 || T < 0 || NH <= 0 || KV <= 0 || HD <= 0 || NH%KV != 0 {
		panic("cuda: " + op + ": want B, T ≥ 0, positive NH, KV and HD, and NH a multiple of KV")
	}
	needLen(op, "qkv", qkv, B*T*(NH+2*KV)*HD)
	needLen(op, "out", out, B*T*NH*HD)
	needLen(op, "lse", lse, B*NH*T)
	if lse.DType() != backend.F32 {
		panic("cuda: " + op + ": lse must be F32")
	}
}

// attMat is one operand of the attention GEMMs for every (batch row b,
// key/value head g): (b, g)'s matrix starts sb·b + sg·g elements past t
// and has row stride ld.
type attMat struct {
	t      kernels.Tensor
	ld     int
	sb, sg int64
}

func (m attMat) at(b, g int) cublas.Matrix {
	typ := cublas.R32F
	if m.t.DT == kernels.BF16 {
		typ = cublas.R16BF
	}
	off := (int64(b)*m.sb + int64(g)*m.sg) * int64(m.t.DT.Size())
	return cublas.Matrix{Ptr: m.t.Ptr.Add(int(off)), Type: typ, LD: m.ld}
}

// shift is m starting elems elements further.
func (m attMat) shift(elems int) attMat {
	m.t.Ptr = m.t.Ptr.Add(elems * m.t.DT.Size())
	return m
}

// attCall is one attention call's dimensions, workspace and error state.
type attCall struct {
	b                *Backend
	op               string
	B, T, NH, KV, HD int
	G, S, CO         int // NH/KV, qkv's and out's row strides
	scale            float32
	releases         []func()
	failed           bool
}

// plan is the call's chunking with dqkv (or, forward, qkv) in dq and GEMM
// operands in gdt.
func (a *attCall) plan(dq, gdt kernels.DType, budget int) attnplan.Plan {
	return attnplan.New(a.B, a.T, a.NH, a.KV, a.HD, backend.DType(dq), backend.DType(gdt), budget)
}

func (b *Backend) newAttCall(op string, B, T, NH, KV, HD int) *attCall {
	return &attCall{b: b, op: op, B: B, T: T, NH: NH, KV: KV, HD: HD, G: NH / KV, S: (NH + 2*KV) * HD, CO: NH * HD,
		scale: float32(1 / math.Sqrt(float64(HD)))}
}

// ok records err (the backend's Sync returns the first) and reports
// whether the call may go on.
func (a *attCall) ok(err error) bool {
	a.b.check(a.op, err)
	a.failed = a.failed || err != nil
	return !a.failed
}

func (a *attCall) release() {
	for _, r := range a.releases {
		r()
	}
}

// scratch lends n elements of dt; false when the device has none (Sync
// reports it).
func (a *attCall) scratch(dt kernels.DType, n int) (kernels.Tensor, bool) {
	t, release, ok := a.b.scratch(dt, n)
	a.releases = append(a.releases, release)
	a.failed = a.failed || !ok
	return t, ok
}

// as returns t (n elements) in dtype dt: t itself, or a widened copy.
func (a *attCall) as(t kernels.Tensor, n int, dt kernels.DType) kernels.Tensor {
	if t.DT == dt || a.failed {
		return t
	}
	w, ok := a.scratch(dt, n)
	if ok {
		a.ok(a.b.k.Cast(a.b.stream, w, t, n))
	}
	return w
}

// workspace borrows at least bytes of scratch and carves it into buffers
// of the given sizes in bytes (0: none), each aligned to attnplan.Align.
func (a *attCall) workspace(bytes int, sizes ...int) []cu.DevicePtr {
	offs := make([]int, len(sizes))
	total := 0
	for i, n := range sizes {
		offs[i] = total
		total += (n + attnplan.Align - 1) &^ (attnplan.Align - 1)
	}
	ws, ok := a.scratch(kernels.F32, (max(total, bytes)+3)/4)
	ptrs := make([]cu.DevicePtr, len(sizes))
	for i, n := range sizes {
		if ok && n > 0 {
			ptrs[i] = ws.Ptr.Add(offs[i])
		}
	}
	return ptrs
}

// gemm queues C(b,g) = alpha·op(A(b,g))·op(B(b,g)) + beta·C(b,g), row-major
// m×n, for every batch row b and key/value head g: one strided batch over
// the larger of B and KV per value of the smaller.
func (a *attCall) gemm(ta, tb cublas.Op, m, n, k int, alpha float32, A, B attMat, beta float32, C attMat) bool {
	if a.failed {
		return false
	}
	return a.ok(a.b.gemm(func(h *cublas.Handle) error {
		if a.B <= a.KV {
			for b := 0; b < a.B; b++ {
				if err := h.GemmStridedBatchedRowMajor(ta, tb, m, n, k, alpha, A.at(b, 0), A.sg, B.at(b, 0), B.sg,
					beta, C.at(b, 0), C.sg, a.KV, a.b.compute(A.t.DT)); err != nil {
					return err
				}
			}
			return nil
		}
		for g := 0; g < a.KV; g++ {
			if err := h.GemmStridedBatchedRowMajor(ta, tb, m, n, k, alpha, A.at(0, g), A.sb, B.at(0, g), B.sb,
				beta, C.at(0, g), C.sb, a.B, a.b.compute(A.t.DT)); err != nil {
				return err
			}
		}
		return nil
	}))
}

// inQKV is the operand of head column col (0 … NH+2·KV) of qkv x: row t
// of (b, g) is token t of head col + g (col + g·G for query heads with
// G > 1 is not a strided matrix; callers gather those).
func (a *attCall) inQKV(x kernels.Tensor, col int) attMat {
	return attMat{t: x, ld: a.S, sb: int64(a.T) * int64(a.S), sg: int64(a.HD)}.shift(col * a.HD)
}

// inTokens is the per-head operand of a (B,T,NH·HD) tensor when G = 1.
func (a *attCall) inTokens(x kernels.Tensor) attMat {
	return attMat{t: x, ld: a.CO, sb: int64(a.T) * int64(a.CO), sg: int64(a.HD)}
}

// inChunk is a chunk buffer of rows of width cols (row stride ld): (b, g)'s
// M rows follow each other.
func (a *attCall) inChunk(p cu.DevicePtr, dt kernels.DType, M, ld int) attMat {
	return attMat{t: kernels.Tensor{Ptr: p, DT: dt}, ld: ld, sb: int64(a.KV) * int64(M) * int64(ld), sg: int64(M) * int64(ld)}
}

func (a *attCall) chunk(r0, rows int) kernels.AttentionChunk {
	return kernels.AttentionChunk{B: a.B, T: a.T, NH: a.NH, KV: a.KV, HD: a.HD, R0: r0, Rows: min(rows, a.T-r0)}
}

// gemmType is the GEMM operand type for inputs of dtypes dts: bf16 when
// every one is bf16, fp32 otherwise.
func gemmType(dts ...kernels.DType) kernels.DType {
	for _, dt := range dts {
		if dt != kernels.BF16 {
			return kernels.F32
		}
	}
	return kernels.BF16
}

// resultType is what a GEMM on gdt operands writes for a destination of
// dtype dt: dt itself when cuBLAS can write it, else fp32 to be cast.
func resultType(dt, gdt kernels.DType) kernels.DType {
	if dt == kernels.F32 || (gdt == kernels.BF16 && dt == kernels.BF16) {
		return dt
	}
	return kernels.F32
}

// AttentionForward implements backend.Backend (see the top of this file).
func (b *Backend) AttentionForward(out, lse, qkv backend.Buffer, B, T, NH, KV, HD int) {
	b.attentionForward(out, lse, qkv, B, T, NH, KV, HD, attentionBudget)
}

func (b *Backend) attentionForward(out, lse, qkv backend.Buffer, B, T, NH, KV, HD, budget int) {
	const op = "attention forward"
	if b.hostOp(op, out, lse, qkv) {
		b.host.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
		return
	}
	attentionDims(op, out, lse, qkv, B, T, NH, KV, HD)
	if B*T == 0 {
		return
	}
	a := b.newAttCall(op, B, T, NH, KV, HD)
	defer a.release()
	o, l := b.t(op, out), b.t(op, lse)
	gdt := gemmType(b.t(op, qkv).DT)
	x := a.as(b.t(op, qkv), qkv.Len(), gdt)
	odt := resultType(o.DT, gdt)
	directO := a.G == 1 && odt == o.DT

	pl := a.plan(b.t(op, qkv).DT, gdt, budget)
	rows := pl.Rows
	cells, heads := B*NH*rows*attnplan.LD(T), B*NH*rows*HD
	sizes := []int{4 * cells, 0, 0, 0}
	if gdt != kernels.F32 {
		sizes[1] = cells * gdt.Size() // P; on fp32 it overwrites S
	}
	if a.G > 1 {
		sizes[2] = heads * gdt.Size() // gathered Q
	}
	if !directO {
		sizes[3] = heads * odt.Size() // O before it is scattered
	}
	ws := a.workspace(pl.Workspace, sizes...)
	if a.failed {
		return
	}
	sp, pp := ws[0], ws[1]
	if pp == 0 {
		pp = sp
	}
	K, V := a.inQKV(x, NH), a.inQKV(x, NH+KV)
	for r0 := 0; r0 < T; r0 += rows {
		c := a.chunk(r0, rows)
		M, cols, ld := a.G*c.Rows, c.Cols(), attnplan.LD(c.Cols())
		Q := a.inQKV(x, 0).shift(r0 * a.S)
		if a.G > 1 {
			Q = a.inChunk(ws[2], gdt, M, HD)
			if !a.ok(b.k.AttentionGather(b.stream, Q.t, kernels.Tensor{}, kernels.Tensor{}, x, kernels.Tensor{}, kernels.Tensor{}, c)) {
				return
			}
		}
		sc, p := a.inChunk(sp, kernels.F32, M, ld), a.inChunk(pp, gdt, M, ld)
		if !a.gemm(cublas.NoTrans, cublas.Trans, M, cols, HD, a.scale, Q, K, 0, sc) ||
			!a.ok(b.k.AttentionSoftmax(b.stream, p.t, l, sc.t, ld, c)) {
			return
		}
		O := a.inTokens(o).shift(r0 * a.CO)
		if !directO {
			O = a.inChunk(ws[3], odt, M, HD)
		}
		if !a.gemm(cublas.NoTrans, cublas.NoTrans, M, HD, cols, 1, p, V, 0, O) {
			return
		}
		if !directO && !a.ok(b.k.AttentionScatter(b.stream, o, a.CO, 0, O.t, B, T, KV, a.G, HD, r0, c.Rows)) {
			return
		}
	}
}

// AttentionBackward implements backend.Backend (see the top of this file).
// It overwrites all of dqkv.
func (b *Backend) AttentionBackward(dqkv, dout, out, qkv, lse backend.Buffer, B, T, NH, KV, HD int) {
	b.attentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD, attentionBudget)
}

func (b *Backend) attentionBackward(dqkv, dout, out, qkv, lse backend.Buffer, B, T, NH, KV, HD, budget int) {
	const op = "attention backward"
	if b.hostOp(op, dqkv, dout, out, qkv, lse) {
		b.host.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
		return
	}
	attentionDims(op, out, lse, qkv, B, T, NH, KV, HD)
	needLen(op, "dout", dout, B*T*NH*HD)
	needLen(op, "dqkv", dqkv, B*T*(NH+2*KV)*HD)
	if B*T == 0 {
		return
	}
	a := b.newAttCall(op, B, T, NH, KV, HD)
	defer a.release()
	dq, do, o, l := b.t(op, dqkv), b.t(op, dout), b.t(op, out), b.t(op, lse)
	gdt := gemmType(b.t(op, qkv).DT, do.DT)
	x := a.as(b.t(op, qkv), qkv.Len(), gdt)
	ddt := resultType(dq.DT, gdt)
	directDO := a.G == 1 && do.DT == gdt
	directDQ := a.G == 1 && ddt == dq.DT

	pl := a.plan(dq.DT, gdt, budget)
	rows, accBytes := pl.Rows, pl.AccBytes
	acc := accBytes > 0
	cells, heads := B*NH*rows*attnplan.LD(T), B*NH*rows*HD
	sizes := make([]int, 9) // S, P, dP, dS, Q, dO, dQ, D, dK|dV
	sizes[0], sizes[2], sizes[7], sizes[8] = 4*cells, 4*cells, 4*B*NH*rows, accBytes
	if gdt != kernels.F32 {
		sizes[1], sizes[3] = cells*gdt.Size(), cells*gdt.Size()
	}
	if a.G > 1 {
		sizes[4] = heads * gdt.Size()
	}
	if !directDO {
		sizes[5] = heads * gdt.Size()
	}
	if !directDQ {
		sizes[6] = heads * ddt.Size()
	}
	ws := a.workspace(pl.Workspace, sizes...)
	if a.failed {
		return
	}
	sp, pp, dpp, dsp := ws[0], ws[1], ws[2], ws[3]
	if pp == 0 {
		pp, dsp = sp, dpp
	}
	D := kernels.Tensor{Ptr: ws[7], DT: kernels.F32}
	K, V := a.inQKV(x, NH), a.inQKV(x, NH+KV)
	dK, dV := a.inQKV(dq, NH), a.inQKV(dq, NH+KV)
	var dKacc, dVacc kernels.Tensor
	if acc {
		dKacc = kernels.Tensor{Ptr: ws[8], DT: kernels.F32}
		dVacc = kernels.Tensor{Ptr: ws[8].Add(4 * B * KV * T * HD), DT: kernels.F32}
		per := func(t kernels.Tensor) attMat {
			return attMat{t: t, ld: HD, sb: int64(KV) * int64(T) * int64(HD), sg: int64(T) * int64(HD)}
		}
		dK, dV = per(dKacc), per(dVacc)
	}
	for ci := pl.Chunks - 1; ci >= 0; ci-- {
		r0 := ci * rows
		c := a.chunk(r0, rows)
		M, cols, ld := a.G*c.Rows, c.Cols(), attnplan.LD(c.Cols())
		Q, dO := a.inQKV(x, 0).shift(r0*a.S), a.inTokens(do).shift(r0*a.CO)
		var qc, doc kernels.Tensor
		if a.G > 1 {
			Q = a.inChunk(ws[4], gdt, M, HD)
			qc = Q.t
		}
		if !directDO {
			dO = a.inChunk(ws[5], gdt, M, HD)
			doc = dO.t
		}
		if !a.ok(b.k.AttentionGather(b.stream, qc, doc, D, x, do, o, c)) {
			return
		}
		sc, dp := a.inChunk(sp, kernels.F32, M, ld), a.inChunk(dpp, kernels.F32, M, ld)
		p, ds := a.inChunk(pp, gdt, M, ld), a.inChunk(dsp, gdt, M, ld)
		// The last chunk comes first and spans every key: it writes dK and
		// dV whole, the chunks after add onto them.
		beta := float32(1)
		if ci == pl.Chunks-1 {
			beta = 0
		}
		dQ := a.inQKV(dq, 0).shift(r0 * a.S)
		if !directDQ {
			dQ = a.inChunk(ws[6], ddt, M, HD)
		}
		if !a.gemm(cublas.NoTrans, cublas.Trans, M, cols, HD, a.scale, Q, K, 0, sc) ||
			!a.gemm(cublas.NoTrans, cublas.Trans, M, cols, HD, 1, dO, V, 0, dp) ||
			!a.ok(b.k.AttentionDSoftmax(b.stream, p.t, ds.t, sc.t, dp.t, ld, l, D, c)) ||
			!a.gemm(cublas.Trans, cublas.NoTrans, cols, HD, M, 1, p, dO, beta, dV) ||
			!a.gemm(cublas.Trans, cublas.NoTrans, cols, HD, M, a.scale, ds, Q, beta, dK) ||
			!a.gemm(cublas.NoTrans, cublas.NoTrans, M, HD, cols, a.scale, ds, K, 0, dQ) {
			return
		}
		if !directDQ && !a.ok(b.k.AttentionScatter(b.stream, dq, a.S, 0, dQ.t, B, T, KV, a.G, HD, r0, c.Rows)) {
			return
		}
	}
	if acc {
		if a.ok(b.k.AttentionScatter(b.stream, dq, a.S, NH, dKacc, B, T, KV, 1, HD, 0, T)) {
			a.ok(b.k.AttentionScatter(b.stream, dq, a.S, NH+KV, dVacc, B, T, KV, 1, HD, 0, T))
		}
	}
}
