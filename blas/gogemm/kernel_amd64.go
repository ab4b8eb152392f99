//go:build amd64

package gogemm

import "golang.org/x/sys/cpu"

// The AVX-512 micro-kernel is Go assembly (kernel_amd64.s), not
// simd/archsimd: the compiler's register allocator gives archsimd values
// 15 vector registers and only the FMA form that overwrites a
// multiplicand, so a 12-accumulator tile spilled accumulators to the
// stack on every step and ran at 7 GFLOP/s a core. In assembly the 12×32
// tile keeps 24 accumulators, two B vectors and two A broadcasts in the 32
// registers AVX-512 has, with no spills.

//go:noescape
func kernelBF16x12x32(kp int, a, b *uint16, c *float32, ldc int, alpha, beta float32)

//go:noescape
func kernel12x32(k int, a, b, c *float32, ldc int, alpha, beta float32)

// bestKernel is the AVX-512 kernel where the CPU (and OS) support
// AVX-512F, else the portable one.
func bestKernel() kernel {
	if cpu.X86.HasAVX512F {
		return kernel{name: "avx512 12×32", mr: 12, nr: 32, fn: kernelAVX512}
	}
	return genericKernel()
}

// kernelAVX512 checks the panel and tile bounds once, then runs the
// assembly kernel, which reads and writes exactly within them.
func kernelAVX512(k int, a, b, c []float32, ldc int, alpha, beta float32) {
	const mr, nr = 12, 32
	_ = a[k*mr-1]
	_ = b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernel12x32(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
}

// bestBF16Kernel is the VDPBF16PS pair kernel where the CPU has
// AVX512_BF16 (CPUID.(EAX=7,ECX=1):EAX[5], which x/sys/cpu reads along with
// the OS's saving of the AVX-512 state), else nil: Bgemm widens.
func bestBF16Kernel() *bf16Kernel {
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512BF16 {
		return &bf16Kernel{name: "avx512bf16 12×32", mr: 12, nr: 32, fn: kernelAVX512BF16}
	}
	return nil
}

// kernelAVX512BF16 checks the panel and tile bounds once, then runs the
// assembly kernel, which reads and writes exactly within them.
func kernelAVX512BF16(kp int, a, b []uint16, c []float32, ldc int, alpha, beta float32) {
	const mr, nr = 12, 32
	_ = a[kp*2*mr-1]
	_ = b[kp*2*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	kernelBF16x12x32(kp, &a[0], &b[0], &c[0], ldc, alpha, beta)
}
