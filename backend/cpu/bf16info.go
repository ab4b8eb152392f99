package cpu

// FastBF16 reports whether training with bf16 storage is faster than fp32
// on this CPU backend. It is not: every GEMM widens bf16 operands to fp32
// first, and the element-wise ops pay a widen and a round per element, so
// bf16 saves memory but costs time. `gotrain bench` picks fp32 by default
// where this is false.
func FastBF16() bool { return false }

// BF16Note says why bf16 is slower than fp32 here, for `gotrain bench`.
func BF16Note() string {
	return "the CPU backend computes in fp32: bf16 operands are widened before every GEMM and rounded after every op, which halves memory but adds passes over it"
}
