package cublas

import (
	"fmt"
	"math"
)

// checkGemm rejects, with a message naming the argument, every GEMM cuBLAS
// would refuse (INVALID_VALUE or NOT_SUPPORTED) and every size that does
// not fit its C int arguments. Sizes are column-major, as cuBLAS sees them.
func checkGemm(op string, transA, transB Op, m, n, k int, a, b, c Matrix, compute ComputeType) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, op, fmt.Sprintf(format, args...))
	}
	for _, t := range [...]struct {
		name string
		op   Op
	}{{"transA", transA}, {"transB", transB}} {
		if t.op != NoTrans && t.op != Trans {
			return bad("%s is %v, want NoTrans or Trans", t.name, t.op)
		}
	}
	for _, d := range [...]struct {
		name string
		v    int
	}{{"m", m}, {"n", n}, {"k", k}, {"lda", a.LD}, {"ldb", b.LD}, {"ldc", c.LD}} {
		if d.v < 0 || d.v > math.MaxInt32 {
			return bad("%s=%d is outside [0, 2^31)", d.name, d.v)
		}
	}
	aRows, bRows := m, k // rows of A and B as stored
	if transA == Trans {
		aRows = k
	}
	if transB == Trans {
		bRows = n
	}
	for _, l := range [...]struct {
		name     string
		ld, rows int
		what     string
	}{{"lda", a.LD, aRows, "A"}, {"ldb", b.LD, bRows, "B"}, {"ldc", c.LD, m, "C"}} {
		if l.ld < max(1, l.rows) {
			return bad("%s=%d is less than max(1, %d), the rows of %s as stored", l.name, l.ld, l.rows, l.what)
		}
	}
	f32 := a.Type == R32F && b.Type == R32F && c.Type == R32F
	bf16 := a.Type == R16BF && b.Type == R16BF && (c.Type == R16BF || c.Type == R32F)
	if !f32 && !bf16 {
		return bad("types A=%v B=%v C=%v: want all CUDA_R_32F, or bf16 A and B with a bf16 or fp32 C", a.Type, b.Type, c.Type)
	}
	switch compute {
	case Compute32F, Compute32FPedantic, Compute32FFast16BF, Compute32FFastTF32:
	default:
		return bad("compute type %v: want one of the fp32-scaled compute types", compute)
	}
	if m > 0 && n > 0 {
		if c.Ptr == 0 {
			return bad("C is a null device pointer")
		}
		if k > 0 && (a.Ptr == 0 || b.Ptr == 0) {
			return bad("A or B is a null device pointer")
		}
	}
	return nil
}

// checkStrides checks a strided batch: counts and strides fit cuBLAS's
// types and are not negative, and the batch's outputs do not overlap (on a
// GPU the batches run concurrently, so overlapping outputs race). Outputs
// (m×n each, column-major with ldc) are apart when they are stacked
// (strideC ≥ ldc·n) or side by side within each column (strideC ≥ m and
// the last one ends by ldc): the second is how attention writes each
// head's rows into its columns of a token-major tensor.
func checkStrides(op string, m, n int, c Matrix, strideA, strideB, strideC int64, batch int) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, op, fmt.Sprintf(format, args...))
	}
	if batch < 0 || batch > math.MaxInt32 {
		return bad("batch count %d is outside [0, 2^31)", batch)
	}
	if strideA < 0 || strideB < 0 || strideC < 0 {
		return bad("strides %d, %d, %d: negative", strideA, strideB, strideC)
	}
	if batch <= 1 || m == 0 || n == 0 {
		return nil
	}
	ldc := int64(c.LD)
	stacked := strideC >= ldc*int64(n)
	sideBySide := strideC >= int64(m) && int64(batch-1)*strideC+int64(m) <= ldc
	if !stacked && !sideBySide {
		return bad("strideC=%d with m=%d, n=%d, ldc=%d and %d products: the batch's outputs would overlap "+
			"(want strideC ≥ ldc·n, or strideC ≥ m with (batch−1)·strideC + m ≤ ldc)", strideC, m, n, ldc, batch)
	}
	return nil
}
