package blas

// Fixed panic messages for bad GEMM arguments. They are bugs in the calling
// package, never run-time conditions, and are the same for every Impl
// (and the same text gonum uses), so a test can match them.
const (
	msgMLT0      = "blas: m < 0"
	msgNLT0      = "blas: n < 0"
	msgKLT0      = "blas: k < 0"
	msgBadLdA    = "blas: bad leading dimension of A"
	msgBadLdB    = "blas: bad leading dimension of B"
	msgBadLdC    = "blas: bad leading dimension of C"
	msgShortA    = "blas: insufficient length of a"
	msgShortB    = "blas: insufficient length of b"
	msgShortC    = "blas: insufficient length of c"
	msgShortBias = "blas: insufficient length of bias"
)

// storedLen is how many elements a rows×cols row-major matrix with leading
// dimension ld spans. A matrix with no elements needs no storage, so nil
// slices are fine for it.
func storedLen(rows, cols, ld int) int {
	if rows == 0 || cols == 0 {
		return 0
	}
	return (rows-1)*ld + cols
}

// checkSgemm panics with a fixed message if the arguments do not describe
// C(m×n) = op(A)(m×k)·op(B)(k×n) in the given slices.
func checkSgemm(transA, transB bool, m, n, k int, lenA, lda, lenB, ldb, lenC, ldc int) {
	if m < 0 {
		panic(msgMLT0)
	}
	if n < 0 {
		panic(msgNLT0)
	}
	if k < 0 {
		panic(msgKLT0)
	}
	// A is stored m×k, or k×m when transposed; likewise B is k×n or n×k.
	rowsA, colsA := m, k
	if transA {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if transB {
		rowsB, colsB = n, k
	}
	if lda < max(1, colsA) {
		panic(msgBadLdA)
	}
	if ldb < max(1, colsB) {
		panic(msgBadLdB)
	}
	if ldc < max(1, n) {
		panic(msgBadLdC)
	}
	// An empty C reads nothing, so (as in gonum) lengths go unchecked.
	if m == 0 || n == 0 {
		return
	}
	if lenA < storedLen(rowsA, colsA, lda) {
		panic(msgShortA)
	}
	if lenB < storedLen(rowsB, colsB, ldb) {
		panic(msgShortB)
	}
	if lenC < storedLen(m, n, ldc) {
		panic(msgShortC)
	}
}

// sgemmTrivial validates the arguments and handles the cases in which A and
// B are not read: an empty C, k == 0 or alpha == 0, where BLAS defines
// C = beta·C (and beta == 0 means C is overwritten with zeros, even where it
// held NaN). It reports whether the call is complete.
func sgemmTrivial(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) bool {
	checkSgemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	return scaleOnly(m, n, k, alpha, beta, c, ldc)
}

// scaleOnly handles, after the arguments are checked, the calls in which A
// and B are not read; it reports whether the call is complete.
func scaleOnly(m, n, k int, alpha, beta float32, c []float32, ldc int) bool {
	if m == 0 || n == 0 {
		return true
	}
	if k != 0 && alpha != 0 {
		return false
	}
	if beta == 1 {
		return true
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
	return true
}
