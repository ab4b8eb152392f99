package blas

import "golang.org/x/sys/cpu"

// CPUFeatures is the subset of x86-64 features that decides which OpenBLAS
// kernels can run. Each field means the CPU has it and the OS saves the
// register state it needs.
type CPUFeatures struct {
	AVX, AVX2, FMA                                  bool
	AVX512F, AVX512CD, AVX512BW, AVX512DQ, AVX512VL bool
}

// HostCPUFeatures reports the running CPU's features. On other
// architectures every field is false.
func HostCPUFeatures() CPUFeatures {
	x := cpu.X86
	return CPUFeatures{
		AVX: x.HasAVX, AVX2: x.HasAVX2, FMA: x.HasFMA,
		AVX512F: x.HasAVX512F, AVX512CD: x.HasAVX512CD, AVX512BW: x.HasAVX512BW,
		AVX512DQ: x.HasAVX512DQ, AVX512VL: x.HasAVX512VL,
	}
}

// ChooseCoreType returns the OPENBLAS_CORETYPE value for a CPU with the
// given features, or "" to leave OpenBLAS's own detection alone.
//
// Why: OpenBLAS's DYNAMIC_ARCH detection keys on CPU vendor and model
// numbers, so CPUs newer than the build (and many virtual CPUs) fall back
// to "Prescott", SSE3 kernels about 5× slower. Choosing by feature bits
// instead only picks kernels the CPU can run: "SkylakeX" uses AVX-512
// F/CD/BW/DQ/VL plus AVX2 and FMA, "Haswell" uses AVX2 and FMA. The GEMM
// self-check after loading still guards the result.
func ChooseCoreType(f CPUFeatures) string {
	if !f.AVX || !f.AVX2 || !f.FMA {
		return ""
	}
	if f.AVX512F && f.AVX512CD && f.AVX512BW && f.AVX512DQ && f.AVX512VL {
		return "SkylakeX"
	}
	return "Haswell"
}

// Names lists the features present, in a fixed order, for reports.
func (f CPUFeatures) Names() []string {
	var out []string
	for _, x := range []struct {
		on   bool
		name string
	}{{f.AVX, "avx"}, {f.AVX2, "avx2"}, {f.FMA, "fma"}, {f.AVX512F, "avx512f"}, {f.AVX512CD, "avx512cd"},
		{f.AVX512BW, "avx512bw"}, {f.AVX512DQ, "avx512dq"}, {f.AVX512VL, "avx512vl"}} {
		if x.on {
			out = append(out, x.name)
		}
	}
	return out
}
