// Package attnplan plans how the CUDA backend splits an attention call into
// chunks of query rows and how much workspace the chunks borrow. It is pure
// Go so that both backend/cuda, which runs the plan, and costmodel, which
// prices it on machines without a GPU, use this one planner.
//
// Per chunk the backend keeps, for every query head, a row of fp32 scores S
// and their gradient dP, 16-bit P and dS, three rows of HD values (the
// gathered queries and output gradients, the output or dQ before it is
// scattered) and D. The chunk's rows are the most that fit the budget at
// that worst-case cost per row, at most MaxRows, so the workspace is
// bounded whatever T is (given room for one row). When dK and dV cannot go
// straight into dqkv they accumulate over the chunks in fp32 buffers of
// B·KV·T·HD each, set aside from the budget first.
package attnplan

import "github.com/gotrain/gotrain/backend"

// Budget is the default workspace budget of one attention call, in bytes.
const Budget = 512 << 20

// MaxRows caps a chunk's query rows: the causal skip saves half of the
// product only when a sequence has several chunks (T/MaxRows of them; 1024
// tokens in 8 chunks compute 56% of the full T×T scores).
const MaxRows = 128

// Align is the alignment of each buffer in the workspace, in bytes.
const Align = 256

// Slack covers the alignment of the workspace's buffers.
const Slack = 10 * Align

// LD is a score row's stride for cols columns: a multiple of 8, so 16-bit
// rows start on 16 bytes.
func LD(cols int) int { return (cols + 7) &^ 7 }

// RowBytes bounds the workspace one query row of a chunk needs, over
// forward and backward and every dtype: per query head, a score row of
// fp32 S and dP and 16-bit P and dS (12 bytes a column, T columns at most),
// three rows of HD at up to 4 bytes and D.
func RowBytes(B, T, NH, HD int) int { return B * NH * (12*LD(T) + 12*HD + 4) }

// ChunkRows is the query rows per chunk of an attention call with budget
// bytes of workspace, fixed of them set aside (backward's fp32 dK/dV
// accumulators): at most MaxRows and T, as many as fit the budget at the
// worst case's cost per row, a multiple of 16 below T (a tensor-core tile),
// and at least 1 (then the workspace exceeds a budget too small for one
// row). The budget is rounded down to a power of two because the backend's
// scratch allocator rounds requests up to one.
func ChunkRows(B, T, NH, HD, fixed, budget int) int {
	if T <= 0 || B <= 0 || NH <= 0 {
		return max(T, 0)
	}
	limit := 1 << 12
	for limit*2 <= budget {
		limit *= 2
	}
	rows := min(T, MaxRows)
	if fit := (limit - fixed - Slack) / RowBytes(B, T, NH, HD); fit < rows {
		rows = max(1, fit)
	}
	if rows < T && rows > 16 {
		rows -= rows % 16
	}
	return rows
}

// Plan is one attention call's chunking.
type Plan struct {
	Rows, Chunks int // query rows per chunk, and how many chunks cover T
	// AccBytes is the fp32 dK, dV accumulators set aside; 0 when dK and dV
	// go straight into dqkv.
	AccBytes int
	// Workspace is the bytes the call borrows: the planner's bound, at most
	// the budget's power of two when a row fits it.
	Workspace int
}

// New plans attention at (B, T, NH, KV, HD) with dqkv in dq and GEMM
// operands in gemm. dK and dV accumulate in dqkv when it is fp32, or when
// one chunk writes them whole in a dtype cuBLAS writes (bf16 from bf16
// operands); otherwise in fp32 accumulators. Forward passes qkv's dtype,
// which training's dqkv shares, so both directions of a layer plan alike
// and borrow one scratch block of the same size.
func New(B, T, NH, KV, HD int, dq, gemm backend.DType, budget int) Plan {
	rows, acc := ChunkRows(B, T, NH, HD, 0, budget), 0
	direct := dq == backend.F32 || (rows >= T && gemm == backend.BF16 && dq == backend.BF16)
	if !direct {
		acc = 2 * 4 * B * KV * T * HD
		rows = ChunkRows(B, T, NH, HD, acc, budget)
	}
	return Plan{Rows: rows, Chunks: (T + rows - 1) / max(rows, 1), AccBytes: acc,
		Workspace: rows*RowBytes(B, T, NH, HD) + acc + Slack}
}
