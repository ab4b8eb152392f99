//go:build !amd64

package gogemm

// bestKernel: off amd64 only the portable kernel exists.
func bestKernel() kernel { return genericKernel() }
