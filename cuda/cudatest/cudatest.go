// Package cudatest builds the mock CUDA driver that tests of cuda, cublas,
// nccl and kernels run against: a C implementation of the driver API
// symbols gotrain uses, on the CPU (testdata/mock_cuda.c says exactly what
// it does and checks). Device pointers it hands out are host pointers from
// malloc, so the mock cuBLAS, cuBLASLt and NCCL it also builds
// (BuildMockCUBLAS, BuildMockCUBLASLt, BuildMockNCCL) compute on them. Its
// mock NVRTC (BuildMockNVRTC) writes PTX the mock driver runs.
//
// It is a non-test package so that every package's tests can use it; it
// is never imported by production code.
package cudatest

import (
	_ "embed"
	"testing"
)

//go:embed testdata/mock_cuda.c
var mockSource []byte

// EnvDevices sets the mock's device count, read at cuInit (default 2; 0
// makes cuInit fail with CUDA_ERROR_NO_DEVICE).
const EnvDevices = "GOTRAIN_MOCK_CUDA_DEVICES"

// EnvMemory caps every mock device's memory at that many bytes, read at
// cuInit, so tests can run a device out of memory.
const EnvMemory = "GOTRAIN_MOCK_CUDA_MEMORY"

// MockDriverVersion is what the mock's cuDriverGetVersion reports (12.4)
// unless built with MOCK_CUDA_DRIVER_VERSION.
const MockDriverVersion = 12040

// Kernels the mock can run, found by name in a loaded PTX module's
// ".entry" lines; their CUDA C signatures and effect:
//
//	gt_test_vadd(float *c, const float *a, const float *b, unsigned n)
//	    c[i] = a[i] + b[i] for each thread i = blockIdx.x*blockDim.x+threadIdx.x < n
//	gt_test_axpby(float *y, const float *x, float a, double b, long long n)
//	    y[i] = a*x[i] + b*y[i] (computed in double) for each thread i < n
//	gt_test_fill2d(int *out, int width, int height, int pitch)
//	    out[y*pitch+x] = 1000*y + x for each thread (x, y) with x < width, y < height
//
// Any other kernel loads but its launch fails with CUDA_ERROR_NOT_SUPPORTED.
const (
	KernelVAdd   = "gt_test_vadd"
	KernelAxpby  = "gt_test_axpby"
	KernelFill2D = "gt_test_fill2d"
)

// MockDevice is what the mock reports for one device.
type MockDevice struct {
	Name                   string
	PCIBusID               string
	Major, Minor           int
	Multiprocessors        int
	TotalMemoryBytes       uint64
	MaxSharedPerBlockOptin int
}

// MockDeviceSpec is the mock's device ordinal: even ordinals are sm_80
// (A100-like), odd ones sm_90 (H100-like).
func MockDeviceSpec(ordinal int) MockDevice {
	bus := "0000:" + hex2(0x10+ordinal) + ":00.0"
	if ordinal%2 == 0 {
		return MockDevice{Name: "gotrain mock GPU (sm_80)", PCIBusID: bus, Major: 8, Minor: 0,
			Multiprocessors: 108, TotalMemoryBytes: 40 << 30, MaxSharedPerBlockOptin: 166912}
	}
	return MockDevice{Name: "gotrain mock GPU (sm_90)", PCIBusID: bus, Major: 9, Minor: 0,
		Multiprocessors: 132, TotalMemoryBytes: 80 << 30, MaxSharedPerBlockOptin: 232448}
}

func hex2(v int) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[v>>4&15], digits[v&15]})
}

// BuildMockDriver compiles the mock driver into a temporary directory of t
// as libcuda.so.1 and returns its path, to be given to cuda.Load as
// Options.Library or through GOTRAIN_LIBCUDA. Each call builds a separate
// file, so each is a separate driver instance with its own state. Each
// define is NAME or NAME=VALUE as for gcc -D: MOCK_CUDA_DRIVER_VERSION=N
// makes it a driver for that CUDA release (default MockDriverVersion),
// with the symbols that release adds; MOCK_CUDA13_NAMES_ONLY leaves out
// the names the CUDA 13.0 header dropped (testdata/mock_cuda.c lists
// them). It skips the test only if gcc is missing.
func BuildMockDriver(t testing.TB, defines ...string) string {
	t.Helper()
	return buildMock(t, "libcuda.so.1", mockSource, defines, "-lpthread", "-lm")
}

// BuildMockLibrary compiles C source into a shared library named name in a
// temporary directory of t and returns its path, for tests that need a
// library of their own making. It skips the test only if gcc is missing.
func BuildMockLibrary(t testing.TB, name string, source []byte) string {
	t.Helper()
	return buildMock(t, name, source, nil, "-lpthread", "-lm")
}
