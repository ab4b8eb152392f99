package kernels

import (
	"github.com/gotrain/gotrain/cuda"
)

// Column sums over N rows (dbias, LayerNorm's dweight and dbias) run in
// two passes: colMaxChunks chunks of at least colMinRows consecutive rows
// each sum their rows, then the chunks are added in order. The chunking
// depends on N only, so results are the same bits on every run.
const (
	colMinRows   = 32
	colMaxChunks = 512
	colThreads   = 128
)

// colChunks splits N rows into chunks of rows consecutive rows.
func colChunks(N int) (chunks, rows int) {
	if N <= 0 {
		return 0, colMinRows
	}
	rows = max(colMinRows, (N+colMaxChunks-1)/colMaxChunks)
	return (N + rows - 1) / rows, rows
}

// colGrid is the geometry of a partial-sum kernel: x covers the packs of
// C columns (a thread sums one pack), y the chunks (at most colMaxChunks,
// well inside grid.y's limit).
func colGrid(C, chunks int) (grid, block cuda.Dim3) {
	p := packs(C)
	threads := min(colThreads, rowThreads(p))
	return cuda.Dim3{X: uint32((p + threads - 1) / threads), Y: uint32(chunks), Z: 1},
		cuda.Dim3{X: uint32(threads), Y: 1, Z: 1}
}

// MatmulEpilogue queues gt_matmul_epilogue over N rows of OC: out = acc +
// bias[col], rounded once to out's dtype. acc is F32 (N,OC) and may be out
// itself when out is F32; a zero acc.Ptr writes the bias alone into every
// row, a zero bias.Ptr adds nothing (not both).
func (s *Set) MatmulEpilogue(st cuda.Stream, out, acc, bias Tensor, N, OC int) error {
	const op = "MatmulEpilogue"
	wantFloat(op, out)
	if acc.Ptr == 0 && bias.Ptr == 0 {
		panic("kernels: " + op + ": neither acc nor bias")
	}
	if acc.Ptr != 0 {
		wantDType(op, "acc", acc, F32)
	}
	if bias.Ptr != 0 {
		wantFloat(op, bias)
	}
	if err := dimsFit(op, N, OC); err != nil || N == 0 || OC == 0 {
		return err
	}
	return s.launch("gt_matmul_epilogue", st, blocksFor(N, 1), rowThreads(packs(OC)),
		out.Ptr, int32(out.DT), acc.Ptr, bias.Ptr, int32(bias.DT), int32(N), int32(OC))
}

// MatmulDbiasPartialLen is how many F32 elements of scratch
// MatmulDbiasPartial writes for dout (N,OC) (0 when N or OC is 0).
func MatmulDbiasPartialLen(N, OC int) int {
	chunks, _ := colChunks(N)
	return chunks * OC
}

// MatmulDbiasPartial queues gt_matmul_dbias_partial: per-chunk column sums
// of dout (N,OC) into partial (F32, MatmulDbiasPartialLen(N, OC)), which
// MatmulDbiasReduce adds onto dbias.
func (s *Set) MatmulDbiasPartial(st cuda.Stream, partial, dout Tensor, N, OC int) error {
	const op = "MatmulDbiasPartial"
	wantFloat(op, dout)
	wantDType(op, "partial", partial, F32)
	if err := dimsFit(op, N, OC, MatmulDbiasPartialLen(N, OC)); err != nil || N == 0 || OC == 0 {
		return err
	}
	chunks, rows := colChunks(N)
	grid, block := colGrid(OC, chunks)
	return s.launch3("gt_matmul_dbias_partial", st, grid, block,
		partial.Ptr, dout.Ptr, int32(dout.DT), int32(N), int32(OC), int32(rows))
}

// MatmulDbiasReduce queues gt_matmul_dbias_reduce: dbias (OC) += the chunk
// sums MatmulDbiasPartial wrote for the same N and OC, chunks in order.
func (s *Set) MatmulDbiasReduce(st cuda.Stream, dbias, partial Tensor, N, OC int) error {
	const op = "MatmulDbiasReduce"
	wantFloat(op, dbias)
	wantDType(op, "partial", partial, F32)
	if err := dimsFit(op, N, OC); err != nil || N == 0 || OC == 0 {
		return err
	}
	chunks, _ := colChunks(N)
	return s.launch("gt_matmul_dbias_reduce", st, blocksFor(OC, colThreads), colThreads,
		dbias.Ptr, int32(dbias.DT), partial.Ptr, int32(chunks), int32(OC))
}
