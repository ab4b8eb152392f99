package kernels

import (
	"fmt"
	"math"

	"github.com/gotrain/gotrain/cuda"
)

// attThreads and attWarps are GT_ATT_THREADS and GT_ATT_WARPS in
// attention.cu: the block size of the row kernels (one warp per row) and
// the rows a block takes at a time.
const (
	attThreads     = 128
	attWarps       = attThreads / 32
	attScatterSize = 256
)

// AttentionChunk is one chunk of an attention call: query rows
// [R0, R0+Rows) of qkv (B,T,(NH+2·KV)·HD), whose scores span keys
// [0, R0+Rows). Its rows are laid out per key/value head g of batch row b,
// M = (NH/KV)·Rows rows each, row r being token R0 + r/(NH/KV) of query
// head g·(NH/KV) + r%(NH/KV): chunk buffers index rows by (b·KV + g)·M + r
// (see attention.cu).
type AttentionChunk struct {
	B, T, NH, KV, HD int
	R0, Rows         int
}

// Cols is the chunk's key columns: every key up to its last query row.
func (c AttentionChunk) Cols() int { return c.R0 + c.Rows }

// ChunkRows is the rows of all the chunk's buffers together, B·NH·Rows.
func (c AttentionChunk) ChunkRows() int { return c.B * c.NH * c.Rows }

// check panics on a shape our own callers cannot mean and returns an
// error for sizes beyond the kernels' int arguments.
func (c AttentionChunk) check(op string) error {
	if c.B < 0 || c.T < 0 || c.NH <= 0 || c.KV <= 0 || c.HD <= 0 || c.NH%c.KV != 0 ||
		c.R0 < 0 || c.Rows < 0 || c.R0+c.Rows > c.T {
		panic("kernels: " + op + ": want B, T ≥ 0, positive NH, KV and HD, NH a multiple of KV, and rows within [0, T)")
	}
	// The kernels take dimensions as int and index with long long; qkv's
	// (NH+2·KV)·HD row stride must stay within int.
	if c.B > math.MaxInt32 || c.T > math.MaxInt32 || (c.NH+2*c.KV)*c.HD > math.MaxInt32 {
		return fmt.Errorf("kernels: %s: B=%d T=%d NH=%d KV=%d HD=%d exceed the kernels' int range", op, c.B, c.T, c.NH, c.KV, c.HD)
	}
	return nil
}

func (c AttentionChunk) dims() []any {
	return []any{int32(c.B), int32(c.T), int32(c.NH), int32(c.KV)}
}

func mustF32(op, name string, t Tensor) {
	if t.DT != F32 {
		panic("kernels: " + op + ": " + name + " must be F32")
	}
}

// AttentionGather queues gt_attention_gather over chunk c: the chunk's
// queries from qkv into qc, its output gradients from dout into doc (both
// rows of HD in qc's or doc's dtype, which must agree), and D =
// rowsum(dout∘out) per row into dc (F32). A zero Ptr skips that output.
func (s *Set) AttentionGather(st cuda.Stream, qc, doc, dc, qkv, dout, out Tensor, c AttentionChunk) error {
	const op = "AttentionGather"
	cdt := qc.DT
	if qc.Ptr == 0 {
		cdt = doc.DT
	} else if doc.Ptr != 0 && doc.DT != qc.DT {
		panic("kernels: " + op + ": qc and doc must share a dtype")
	}
	if dc.Ptr != 0 {
		mustF32(op, "dc", dc)
	}
	if err := c.check(op); err != nil || c.ChunkRows() == 0 {
		return err
	}
	return s.launch("gt_attention_gather", st, blocksFor(c.ChunkRows(), attWarps), attThreads,
		append([]any{qc.Ptr, doc.Ptr, int32(cdt), dc.Ptr, qkv.Ptr, int32(qkv.DT), dout.Ptr, int32(dout.DT), out.Ptr, int32(out.DT)},
			append(c.dims(), int32(c.HD), int32(c.R0), int32(c.Rows))...)...)
}

// AttentionSoftmax queues gt_attention_softmax over chunk c: from the
// scaled scores (F32, row stride ld ≥ Cols), the causal probabilities
// into p (same stride; p may be scores) and each row's log-sum-exp into
// lse (B,NH,T, F32).
func (s *Set) AttentionSoftmax(st cuda.Stream, p, lse, scores Tensor, ld int, c AttentionChunk) error {
	const op = "AttentionSoftmax"
	mustF32(op, "lse", lse)
	mustF32(op, "scores", scores)
	if ld < c.Cols() {
		panic("kernels: " + op + ": ld is less than the chunk's columns")
	}
	if err := c.check(op); err != nil || c.ChunkRows() == 0 {
		return err
	}
	return s.launch("gt_attention_softmax", st, blocksFor(c.ChunkRows(), attWarps), attThreads,
		append([]any{p.Ptr, int32(p.DT), lse.Ptr, scores.Ptr, int64(ld)}, append(c.dims(), int32(c.R0), int32(c.Rows), int32(c.Cols()))...)...)
}

// AttentionDSoftmax queues gt_attention_dsoftmax over chunk c: from the
// recomputed scaled scores and dP = dO·Vᵀ (both F32, row stride ld), lse
// and the rows' D (dc, F32), the probabilities into p and dS = P∘(dP − D)
// into ds (one dtype for both; p may be scores and ds may be dp).
func (s *Set) AttentionDSoftmax(st cuda.Stream, p, ds, scores, dp Tensor, ld int, lse, dc Tensor, c AttentionChunk) error {
	const op = "AttentionDSoftmax"
	for _, x := range []struct {
		name string
		t    Tensor
	}{{"scores", scores}, {"dp", dp}, {"lse", lse}, {"dc", dc}} {
		mustF32(op, x.name, x.t)
	}
	if p.DT != ds.DT {
		panic("kernels: " + op + ": p and ds must share a dtype")
	}
	if ld < c.Cols() {
		panic("kernels: " + op + ": ld is less than the chunk's columns")
	}
	if err := c.check(op); err != nil || c.ChunkRows() == 0 {
		return err
	}
	return s.launch("gt_attention_dsoftmax", st, blocksFor(c.ChunkRows(), 1), attThreads,
		append([]any{p.Ptr, ds.Ptr, int32(p.DT), scores.Ptr, dp.Ptr, int64(ld), lse.Ptr, dc.Ptr},
			append(c.dims(), int32(c.R0), int32(c.Rows), int32(c.Cols()))...)...)
}

// AttentionScatter queues gt_attention_scatter: B·U·G·rows rows of HD from
// src (rows (b·U + u)·G·rows + r, r being token r0 + r/G of head u·G + r%G)
// into dst at (b·T + t)·dstLD + (hoff + head)·HD. With U = KV and G =
// NH/KV it writes a chunk's output (dstLD = NH·HD, hoff 0) or query
// gradient (dstLD = (NH+2·KV)·HD, hoff 0); with G = 1, r0 = 0, rows = T
// the key (hoff NH) or value (hoff NH+KV) gradients.
func (s *Set) AttentionScatter(st cuda.Stream, dst Tensor, dstLD, hoff int, src Tensor, B, T, U, G, HD, r0, rows int) error {
	const op = "AttentionScatter"
	if B < 0 || U <= 0 || G <= 0 || HD <= 0 || r0 < 0 || rows < 0 || r0+rows > T || dstLD < (hoff+U*G)*HD {
		panic("kernels: " + op + ": bad shape")
	}
	n := B * U * G * rows * HD
	if n == 0 {
		return nil
	}
	if B > math.MaxInt32 || T > math.MaxInt32 || U*G*HD > math.MaxInt32 {
		return fmt.Errorf("kernels: %s: B=%d T=%d heads=%d HD=%d exceed the kernels' int range", op, B, T, U*G, HD)
	}
	return s.launch("gt_attention_scatter", st, blocksFor(n, attScatterSize), attScatterSize,
		dst.Ptr, int32(dst.DT), int64(dstLD), int32(hoff), src.Ptr, int32(src.DT),
		int32(B), int32(T), int32(U), int32(G), int32(HD), int32(r0), int32(rows))
}
