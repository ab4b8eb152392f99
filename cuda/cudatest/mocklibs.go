package cudatest

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The CUDA libraries' mocks live here, next to the driver's, so that any
// package's tests can load the whole stack (driver, cuBLAS, cuBLASLt,
// NCCL) on the same mock devices.
var (
	//go:embed testdata/mock_cublas.c
	mockCUBLASSource []byte
	//go:embed testdata/mock_cublaslt.c
	mockCUBLASLtSource []byte
	//go:embed testdata/mock_gemm.h
	mockGEMMHeader []byte
	//go:embed testdata/mock_counters.h
	mockCountersHeader []byte
	//go:embed testdata/mock_nccl.c
	mockNCCLSource []byte
	//go:embed testdata/mock_nvrtc.c
	mockNVRTCSource []byte
)

// BuildMockCUBLAS compiles the mock cuBLAS (testdata/mock_cublas.c) into a
// temporary directory of t as libcublas.so.12 and returns its path, for
// cublas.Load through GOTRAIN_LIBCUBLAS. Each define is NAME or NAME=VALUE
// as for gcc -D: MOCK_CUBLAS_MAJOR/MINOR/PATCH set the version it reports
// (default 12.3.4), MOCK_NO_STATUS_STRING leaves out the status-string
// calls, MOCK_CREATE_NOT_INITIALIZED makes cublasCreate_v2 fail as on a
// machine without a usable GPU or driver. It skips the test only if gcc
// is missing.
func BuildMockCUBLAS(t testing.TB, defines ...string) string {
	t.Helper()
	return buildMock(t, "libcublas.so.12", mockCUBLASSource, defines, "-lm")
}

// BuildMockCUBLASLt compiles the mock cuBLASLt (testdata/mock_cublaslt.c)
// as libcublasLt.so.12, for cublas.Load through GOTRAIN_LIBCUBLASLT.
// Defines: MOCK_CUBLASLT_VERSION (default 120304), MOCK_LT_NO_ALGO (the
// heuristic finds no algorithm), MOCK_CREATE_NOT_INITIALIZED (as for
// cuBLAS). It skips the test only if gcc is missing.
// With EnvCUBLASLtTrace set, the mock traces its descriptor creations,
// heuristic queries and matmuls to that file.
func BuildMockCUBLASLt(t testing.TB, defines ...string) string {
	t.Helper()
	return buildMock(t, "libcublasLt.so.12", mockCUBLASLtSource, defines, "-lm")
}

// EnvCUBLASLtTrace names a file the mock cuBLASLt appends a line to for
// every descriptor it creates ("desc_create"), heuristic query
// ("heuristic") and matmul ("matmul EPILOGUE"), so tests can count them.
const EnvCUBLASLtTrace = "GOTRAIN_MOCK_CUBLASLT_TRACE"

// BuildMockNCCL compiles the mock NCCL (testdata/mock_nccl.c) as
// libnccl.so.2, for nccl.Load through GOTRAIN_LIBNCCL. Its ranks are
// threads of the test process and its device pointers are the mock
// driver's (host memory). Defines: MOCK_NCCL_VERSION=N, the release it
// reports and implements, in NCCL's encoding (default 21903, 2.19.3). It
// skips the test only if gcc is missing.
func BuildMockNCCL(t testing.TB, defines ...string) string {
	t.Helper()
	return buildMock(t, "libnccl.so.2", mockNCCLSource, defines, "-lpthread", "-lm")
}

// The architectures NVRTC releases support, as nvrtcGetSupportedArchs
// lists them, for BuildMockNVRTC's MOCK_NVRTC_ARCHS.
const (
	// NVRTC124Archs is CUDA 12.4's list (the mock's default).
	NVRTC124Archs = "50,52,53,60,61,62,70,72,75,80,86,87,89,90"
	// NVRTC129Archs adds the Blackwell family, with Thor as sm_101.
	NVRTC129Archs = "50,52,53,60,61,62,70,72,75,80,86,87,89,90,100,101,103,120,121"
	// NVRTC130Archs drops Maxwell, Pascal and Volta (sm_50 to sm_72),
	// names Thor sm_110 instead of sm_101 and adds sm_88.
	NVRTC130Archs = "75,80,86,87,88,89,90,100,103,110,120,121"
)

// BuildMockNVRTC compiles the mock NVRTC (testdata/mock_nvrtc.c) as
// libnvrtc.so.12, for kernels.LoadNVRTC through NVRTCOptions.Library or
// GOTRAIN_LIBNVRTC. It "compiles" to PTX the mock driver can load and run
// by kernel name, and refuses a target its release does not support.
// Defines: MOCK_NVRTC_MAJOR/MINOR=N (default 12.4), MOCK_NVRTC_ARCHS=list
// (one of the NVRTC*Archs lists; default NVRTC124Archs) and
// MOCK_NVRTC_NO_PTX_FOR_SM (an sm_XX compilation keeps no PTX). It skips
// the test only if gcc is missing.
func BuildMockNVRTC(t testing.TB, defines ...string) string {
	t.Helper()
	return buildMock(t, "libnvrtc.so.12", mockNVRTCSource, defines)
}

// buildMock writes source and the shared headers next to each other in a
// temporary directory, so that #include "mock_gemm.h" and
// "mock_counters.h" resolve, and
// compiles the shared library name there with the mock driver's warning
// flags.
func buildMock(t testing.TB, name string, source []byte, defines []string, libs ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skipf("gcc not found, cannot build the mock %s: %v", name, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, name+".c")
	for path, data := range map[string][]byte{src: source, filepath.Join(dir, "mock_gemm.h"): mockGEMMHeader,
		filepath.Join(dir, "mock_counters.h"): mockCountersHeader} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatalf("write mock source: %v", err)
		}
	}
	lib := filepath.Join(dir, name)
	args := []string{"-shared", "-fPIC", "-O1", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I", dir}
	for _, d := range defines {
		args = append(args, "-D"+d)
	}
	args = append(args, "-o", lib, src)
	args = append(args, libs...)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("build mock %s: %v\n%s", name, err, out)
	}
	return lib
}
