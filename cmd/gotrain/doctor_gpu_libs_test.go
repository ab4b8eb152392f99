package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/nccl"
)

// TestDoctorGPULibsMissing: with the libraries absent (the override names a
// file that does not exist), each probe explains what was tried and what to
// install, without failing.
func TestDoctorGPULibsMissing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(cublas.EnvLibrary, filepath.Join(dir, "libcublas.so.12"))
	t.Setenv(nccl.EnvLibrary, filepath.Join(dir, "libnccl.so.2"))
	for _, c := range []struct {
		got  doctorLib
		want []string
	}{
		{doctorCUBLAS(nil), []string{"cublas", "libcublas.so.12", cublas.EnvLibrary, "libcublas12"}},
		{doctorNCCL(nil), []string{"nccl", "libnccl.so.2", nccl.EnvLibrary, "libnccl2"}},
	} {
		if c.got.Version != "" || c.got.Path != "" {
			t.Errorf("%s: found %q at %q", c.got.Name, c.got.Version, c.got.Path)
		}
		text := c.got.Name + " " + c.got.Err
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q does not mention %q", c.got.Name, text, w)
			}
		}
	}
}

// TestDoctorGPULibsPresent runs the probes against the packages' mock
// libraries, which report fixed versions.
func TestDoctorGPULibsPresent(t *testing.T) {
	t.Setenv(cublas.EnvLibrary, cudatest.BuildMockCUBLAS(t))
	t.Setenv(cublas.EnvLtLibrary, cudatest.BuildMockCUBLASLt(t))
	t.Setenv(nccl.EnvLibrary, cudatest.BuildMockNCCL(t, "MOCK_NCCL_VERSION=2708"))
	cb := doctorCUBLAS(nil)
	if cb.Err != "" || cb.Version != "12.3.4, cuBLASLt 12.3.4" || !strings.HasSuffix(cb.Path, "libcublas.so.12") {
		t.Errorf("doctorCUBLAS(nil) = %+v", cb)
	}
	nc := doctorNCCL(nil)
	if nc.Version != "2.7.8" || !strings.HasSuffix(nc.Path, "libnccl.so.2") || !strings.Contains(nc.Err, "2.10.3") {
		t.Errorf("doctorNCCL(nil) with NCCL 2.7.8 = %+v, want a note that bf16 and avg need 2.10.3", nc)
	}
}
