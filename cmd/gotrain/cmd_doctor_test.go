package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/metrics"
)

// With the mock driver, doctor lists its devices through the CUDA driver;
// NVRTC and NVML pointed at missing files are explained, not fatal.
func TestDoctorGPUsThroughMockDriver(t *testing.T) {
	lib := cudatest.BuildMockDriver(t)
	t.Setenv(cuda.EnvLibrary, lib)
	t.Setenv(cudatest.EnvDevices, "2")
	t.Setenv(kernels.EnvNVRTC, filepath.Join(t.TempDir(), "libnvrtc.so.12"))
	t.Setenv(metrics.EnvNVML, filepath.Join(t.TempDir(), "libnvidia-ml.so.1"))
	out, _, err := run(t, "doctor", "--json", "--seconds", "0.01")
	if err != nil {
		t.Fatalf("doctor: %v", err)
	}
	var r doctorReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json output: %v\n%s", err, out)
	}
	drv, ok := doctorLibNamed(r.GPULibs, "cuda driver")
	if !ok || drv.Version != "12.4" || drv.Path != lib || drv.Err != "" {
		t.Errorf("cuda driver entry %+v, want version 12.4 from %s", drv, lib)
	}
	if len(r.GPUs) != 2 {
		t.Fatalf("%d GPUs, want 2", len(r.GPUs))
	}
	for i, g := range r.GPUs {
		want := cudatest.MockDeviceSpec(i)
		if g.Name != want.Name || g.Major != want.Major || g.Minor != want.Minor || g.TotalMemoryBytes != want.TotalMemoryBytes {
			t.Errorf("GPU %d = %+v, want %+v", i, g, want)
		}
	}
	if nv, ok := doctorLibNamed(r.GPULibs, "nvrtc"); !ok || nv.Version != "" || !strings.Contains(nv.Err, "libnvrtc11.2") {
		t.Errorf("nvrtc entry %+v, want the reason it is absent and what to install", nv)
	}
	if r.NVML != nil || !strings.Contains(r.NVMLError, "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("nvml %+v / %q, want ERROR_LIBRARY_NOT_FOUND", r.NVML, r.NVMLError)
	}

	text, _, err := run(t, "doctor", "--seconds", "0.01")
	if err != nil {
		t.Fatalf("doctor: %v", err)
	}
	for _, want := range []string{"cuda driver  12.4 (" + lib + ")", "gpus         2 through the CUDA driver",
		"gpu 1: " + cudatest.MockDeviceSpec(1).Name + ", sm_90", "nvrtc        not available", "nvml         not available"} {
		if !strings.Contains(text, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, text)
		}
	}
}

// Without a driver doctor says why and still succeeds.
func TestDoctorWithoutDriver(t *testing.T) {
	t.Setenv(cuda.EnvLibrary, filepath.Join(t.TempDir(), "libcuda.so.1"))
	t.Setenv(metrics.EnvNVML, filepath.Join(t.TempDir(), "libnvidia-ml.so.1"))
	out, _, err := run(t, "doctor", "--seconds", "0.01")
	if err != nil {
		t.Fatalf("doctor without a driver failed: %v", err)
	}
	if !strings.Contains(out, "cuda driver  not available:") || !strings.Contains(out, "NVIDIA driver") {
		t.Errorf("doctor output does not explain the missing driver:\n%s", out)
	}
	if strings.Contains(out, "through the CUDA driver") {
		t.Errorf("doctor lists GPUs without a driver:\n%s", out)
	}
}
