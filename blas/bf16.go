package blas

// BF16Impl is a GEMM that multiplies bfloat16 operands itself, with fp32
// accumulation, so a caller holding bf16 matrices needs no widened copies.
type BF16Impl interface {
	// Bgemm is Sgemm with A and B bfloat16 (raw bits: the upper half of
	// a float32) and C fp32. Products are exact in fp32; the result equals
	// Sgemm on the widened operands up to fp32 rounding of the sums (and
	// denormals may flush to zero).
	Bgemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int)
	// NativeBF16 reports whether Bgemm runs a bf16 kernel (AVX512_BF16),
	// at about twice Sgemm's rate, rather than widening to fp32 while
	// packing.
	NativeBF16() bool
	// BF16Kernel names the way Bgemm computes, for bench and doctor.
	BF16Kernel() string
}

// BF16Rounder is a BF16Impl that can also write a product rounded to bf16,
// with no fp32 C between the kernel and the rounding.
type BF16Rounder interface {
	// BgemmRound sets C = bf16(alpha·op(A)·op(B) + bias), bias (length n,
	// or nil) added in fp32 to every row, the sum rounded to nearest even
	// as Bgemm with beta = 1 over the bias rows then rounded would be. It
	// reports false, having written nothing, for a product it does not
	// take (no bf16 kernel, or k too deep for one pass): the caller then
	// runs Bgemm into fp32 and rounds.
	BgemmRound(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, bias []float32, c []uint16, ldc int) bool
}

// AsBF16 returns impl's bf16 GEMM, seeing through a Recorder (whose tally
// then counts bf16 shapes with Shape.BF16 set), or nil when impl has none
// (OpenBLAS and gonum here: their callers widen).
func AsBF16(impl Impl) BF16Impl {
	switch x := impl.(type) {
	case *Recorder:
		inner := AsBF16(x.Impl)
		if inner == nil {
			return nil
		}
		return recordingBF16{BF16Impl: inner, r: x}
	case BF16Impl:
		return x
	}
	return nil
}

// Bgemm implements BF16Impl.
func (o *Go) Bgemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	checkSgemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if scaleOnly(m, n, k, alpha, beta, c, ldc) {
		return
	}
	o.g.Bgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// BgemmRound implements BF16Rounder.
func (o *Go) BgemmRound(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, bias []float32, c []uint16, ldc int) bool {
	checkSgemm(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc)
	if bias != nil && len(bias) < n {
		panic(msgShortBias)
	}
	if m == 0 || n == 0 {
		return true
	}
	if k == 0 || alpha == 0 {
		return false
	}
	return o.g.BgemmRound(transA, transB, m, n, k, alpha, a, lda, b, ldb, bias, c, ldc)
}

// NativeBF16 implements BF16Impl.
func (o *Go) NativeBF16() bool { return o.g.NativeBF16() }

// BF16Kernel implements BF16Impl.
func (o *Go) BF16Kernel() string { return o.g.BF16Kernel() }

// recordingBF16 is a Recorder's view of its Impl's bf16 GEMM.
type recordingBF16 struct {
	BF16Impl
	r *Recorder
}

// Bgemm implements BF16Impl.
func (rb recordingBF16) Bgemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	rb.r.add(Shape{TransA: transA, TransB: transB, M: m, N: n, K: k, BF16: true})
	rb.BF16Impl.Bgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// BgemmRound implements BF16Rounder, counting the shape as Bgemm does when
// the inner GEMM takes it.
func (rb recordingBF16) BgemmRound(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, bias []float32, c []uint16, ldc int) bool {
	r, ok := rb.BF16Impl.(BF16Rounder)
	if !ok || !r.BgemmRound(transA, transB, m, n, k, alpha, a, lda, b, ldb, bias, c, ldc) {
		return false
	}
	rb.r.add(Shape{TransA: transA, TransB: transB, M: m, N: n, K: k, BF16: true})
	return true
}

// withNativeBF16 gives impl (OpenBLAS, which has no bf16 GEMM) the Go GEMM's
// bf16 products where the CPU multiplies bf16 natively (AVX512_BF16): auto
// then runs fp32 products on OpenBLAS and bf16 ones at about twice their
// rate, instead of widening bf16 operands for OpenBLAS. Elsewhere impl is
// returned as it is.
func withNativeBF16(impl Impl, threads int) Impl {
	g := NewGo(threads)
	if !g.NativeBF16() {
		return impl
	}
	return bf16Beside{Impl: impl, bf: g}
}

// bf16Beside is an Impl whose bf16 products run on the Go GEMM.
type bf16Beside struct {
	Impl
	bf *Go
}

// Bgemm implements BF16Impl.
func (b bf16Beside) Bgemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, bm []uint16, ldb int, beta float32, c []float32, ldc int) {
	b.bf.Bgemm(transA, transB, m, n, k, alpha, a, lda, bm, ldb, beta, c, ldc)
}

// BgemmRound implements BF16Rounder.
func (b bf16Beside) BgemmRound(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, bm []uint16, ldb int, bias []float32, c []uint16, ldc int) bool {
	return b.bf.BgemmRound(transA, transB, m, n, k, alpha, a, lda, bm, ldb, bias, c, ldc)
}

// NativeBF16 implements BF16Impl.
func (b bf16Beside) NativeBF16() bool { return true }

// BF16Kernel implements BF16Impl.
func (b bf16Beside) BF16Kernel() string { return "go " + b.bf.BF16Kernel() }
