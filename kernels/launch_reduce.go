package kernels

import "github.com/gotrain/gotrain/cuda"

const (
	reduceThreads = 256
	// reducePerThread is the fewest elements a reduction thread visits
	// before the grid grows, so a block's closing reduction is amortised.
	reducePerThread = 16
	// reduceMaxBlocks caps the reduction grids: enough blocks to fill any
	// current GPU, few enough partial sums to read back cheaply.
	reduceMaxBlocks = 1024
)

// reduceBlocks is the grid of a reduction over n > 0 elements.
func reduceBlocks(n int) int {
	return min(blocksFor(n, reduceThreads*reducePerThread), reduceMaxBlocks)
}

// SumSquaresBlocks is the number of float64 partial sums SumSquares writes
// for n elements (0 for n = 0). It depends on n only, so the sum of the
// partials in index order is the same bits on every run.
func SumSquaresBlocks(n int) int {
	if n <= 0 {
		return 0
	}
	return reduceBlocks(n)
}

// SumSquares queues gt_sum_squares: Σx² over the n elements of x (a float
// dtype), accumulated in float64, as SumSquaresBlocks(n) partial sums, one
// per block, written as float64 values at partials. The caller adds them in
// index order.
func (s *Set) SumSquares(st cuda.Stream, partials cuda.DevicePtr, x Tensor, n int) error {
	mustFloat("SumSquares", x)
	if n < 0 {
		panic("kernels: SumSquares: negative length")
	}
	blocks := SumSquaresBlocks(n)
	if blocks == 0 {
		return nil
	}
	return s.launch("gt_sum_squares", st, blocks, reduceThreads, partials, x.Ptr, int32(x.DT), int64(n))
}

// NonFinite queues gt_nonfinite: flag (I32, one element) is set to 1 if any
// of the n elements of x (a float dtype) is a NaN or an Inf. The caller
// zeroes flag first; the kernel never clears it.
func (s *Set) NonFinite(st cuda.Stream, flag, x Tensor, n int) error {
	mustFloat("NonFinite", x)
	if flag.DT != I32 {
		panic("kernels: NonFinite: flag must be I32")
	}
	if n < 0 {
		panic("kernels: NonFinite: negative length")
	}
	if n == 0 {
		return nil
	}
	return s.launch("gt_nonfinite", st, reduceBlocks(n), reduceThreads,
		flag.Ptr, x.Ptr, int32(x.DT), int64(n))
}

// mustFloat panics unless t holds floats: the reductions read 16-bit
// storage as bf16 or fp16 bit patterns.
func mustFloat(op string, t Tensor) {
	if t.DT != F32 && t.DT != BF16 && t.DT != F16 {
		panic("kernels: " + op + ": x must be F32, BF16 or F16")
	}
}

// AddSum queues gt_add_sum: acc (F32, one element) += Σx over the n F32
// elements of x, in one block, accumulated in float64 in a fixed order.
func (s *Set) AddSum(st cuda.Stream, acc, x Tensor, n int) error {
	mustF32("AddSum", "acc", acc)
	mustF32("AddSum", "x", x)
	if n < 0 {
		panic("kernels: AddSum: negative length")
	}
	return s.launch("gt_add_sum", st, 1, reduceThreads, acc.Ptr, x.Ptr, int64(n))
}
