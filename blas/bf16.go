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
