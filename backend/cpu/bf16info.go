package cpu

import "github.com/gotrain/gotrain/blas"

// FastBF16 reports whether training with bf16 storage on a CPU backend
// using gemm is faster than fp32: when gemm multiplies bf16 natively
// (the Go GEMM's VDPBF16PS kernel on a CPU with AVX512_BF16), at about twice
// the fp32 rate from half the bytes. Elsewhere every bf16 matmul widens its
// operands first and bf16 saves memory but costs time. `gotrain bench`
// picks fp32 by default where this is false.
func FastBF16(gemm blas.Impl) bool {
	b := blas.AsBF16(gemm)
	return b != nil && b.NativeBF16()
}

// BF16Note says why bf16 is slower than fp32 with gemm, for `gotrain bench`.
func BF16Note(gemm blas.Impl) string {
	if b := blas.AsBF16(gemm); b != nil {
		if b.NativeBF16() {
			return "bf16 GEMMs run " + b.BF16Kernel() + ", about twice the fp32 rate"
		}
		return "this CPU lacks AVX512_BF16, so the bf16 GEMM widens its operands to fp32 (" + b.BF16Kernel() + ") and element-wise ops add a widen and a round per element"
	}
	return "this GEMM (" + gemm.Info().Name + ") multiplies fp32 only: bf16 operands are widened before every GEMM and rounded after every op, which halves memory but adds passes over it; --blas go has a bf16 GEMM"
}
