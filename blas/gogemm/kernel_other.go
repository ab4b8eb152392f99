//go:build !amd64

package gogemm

// bestKernel: off amd64 only the portable kernel exists.
func bestKernel() kernel { return genericKernel() }

// bestBF16Kernel: off amd64 Bgemm widens into the portable kernel.
func bestBF16Kernel() *bf16Kernel { return nil }
