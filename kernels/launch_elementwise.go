package kernels

import (
	"fmt"
	"math"

	"github.com/gotrain/gotrain/cuda"
)

// ewThreads is the block size of the element-wise kernels (elementwise.cu,
// gelu.cu, swiglu.cu): one thread per pack, grid-stride.
const ewThreads = 256

// packLen is packed.cuh's GT_PACK: the elements one thread of a vectorised
// kernel moves per access.
const packLen = 8

// packs is how many packs of packLen cover n elements.
func packs(n int) int { return (n + packLen - 1) / packLen }

// Add queues gt_add: out = a + b over n elements, each of any float dtype;
// out may alias a or b.
func (s *Set) Add(st cuda.Stream, out, a, b Tensor, n int) error {
	const op = "Add"
	if !elemArgs(op, n, out, a, b) {
		return nil
	}
	return s.launch("gt_add", st, blocksFor(packs(n), ewThreads), ewThreads,
		out.Ptr, int32(out.DT), a.Ptr, int32(a.DT), b.Ptr, int32(b.DT), int64(n))
}

// Scale queues gt_scale: x *= scale over n elements of a float dtype.
func (s *Set) Scale(st cuda.Stream, x Tensor, scale float32, n int) error {
	const op = "Scale"
	if !elemArgs(op, n, x) {
		return nil
	}
	return s.launch("gt_scale", st, blocksFor(packs(n), ewThreads), ewThreads, x.Ptr, int32(x.DT), scale, int64(n))
}

// Dropout queues gt_dropout: out = inp·scale where element i's random
// bits under seed are at least threshold, else 0, over n elements of any
// float dtypes (out may alias inp).
func (s *Set) Dropout(st cuda.Stream, out, inp Tensor, n int, seed uint64, threshold uint32, scale float32) error {
	const op = "Dropout"
	if !elemArgs(op, n, out, inp) {
		return nil
	}
	return s.launch("gt_dropout", st, blocksFor(packs(n), ewThreads), ewThreads,
		out.Ptr, int32(out.DT), inp.Ptr, int32(inp.DT), int64(n), seed, threshold, scale)
}

// Cast queues gt_cast: dst = src over n elements, converted from src's
// float dtype to dst's (exactly when widening, round to nearest even when
// narrowing, NaN kept a NaN of the same sign). dst and src must not
// overlap unless they are the same array of the same dtype.
func (s *Set) Cast(st cuda.Stream, dst, src Tensor, n int) error {
	const op = "Cast"
	if !elemArgs(op, n, dst, src) {
		return nil
	}
	return s.launch("gt_cast", st, blocksFor(packs(n), ewThreads), ewThreads,
		dst.Ptr, int32(dst.DT), src.Ptr, int32(src.DT), int64(n))
}

// elemArgs panics unless n ≥ 0 and every tensor is a float dtype, and
// reports whether there is anything to launch.
func elemArgs(op string, n int, ts ...Tensor) bool {
	if n < 0 {
		panic("kernels: " + op + ": negative length")
	}
	for _, t := range ts {
		wantFloat(op, t)
	}
	return n > 0
}

// wantFloat panics unless t is F32, BF16 or F16: a float kernel would read
// other storage as the wrong bits.
func wantFloat(op string, t Tensor) {
	if t.DT != F32 && t.DT != BF16 && t.DT != F16 {
		panic("kernels: " + op + ": a float tensor must be F32, BF16 or F16")
	}
}

// wantDType panics unless t has dtype dt (F32 statistics, I32 ids).
func wantDType(op, name string, t Tensor, dt DType) {
	if t.DT != dt {
		panic("kernels: " + op + ": " + name + " has the wrong dtype")
	}
}

// dimsFit panics on a negative dimension (a caller's bug) and returns an
// error when one does not fit the kernels' int parameters.
func dimsFit(op string, dims ...int) error {
	for _, d := range dims {
		if d < 0 {
			panic("kernels: " + op + ": negative dimension")
		}
		if d > math.MaxInt32 {
			return fmt.Errorf("kernels: %s: dimension %d exceeds the kernels' int range", op, d)
		}
	}
	return nil
}

// rowThreads is the block size of kernels that give a block one row of C
// elements, threads across the row: C rounded up to whole warps, at most
// 256, so short rows do not leave most of a block idle.
func rowThreads(C int) int {
	return min(256, max(32, (C+31)/32*32))
}
