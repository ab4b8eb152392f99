//go:build cgo

package metrics

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// A machine with an A100 and an H100, from go-nvml's mock servers.
func TestQueryNVMLMixedMachine(t *testing.T) {
	srv := dgxa100.NewWithGPUs(gpus.A100_SXM4_40GB, gpus.H100_SXM5_80GB)
	shutdowns := 0
	srv.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	d0 := srv.Devices[0].(*dgxa100.Device)
	d1 := srv.Devices[1].(*dgxa100.Device)
	d0.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 37, Memory: 12}, nvml.SUCCESS
	}
	d1.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED
	}
	d1.MemoryInfo.Used = 5 << 30
	d1.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for i, c := range "00000000:41:00.0" {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}

	rep, err := QueryNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	if shutdowns != 1 {
		t.Errorf("Shutdown called %d times, want 1", shutdowns)
	}
	if rep.DriverVersion != srv.DriverVersion || rep.NVMLVersion != srv.NvmlVersion || rep.CUDADriverVersion != srv.CudaDriverVersion {
		t.Errorf("versions %q %q %d, want %q %q %d", rep.DriverVersion, rep.NVMLVersion, rep.CUDADriverVersion,
			srv.DriverVersion, srv.NvmlVersion, srv.CudaDriverVersion)
	}
	if len(rep.GPUs) != 2 {
		t.Fatalf("%d GPUs, want 2", len(rep.GPUs))
	}
	for i, dev := range []*dgxa100.Device{d0, d1} {
		g := rep.GPUs[i]
		if g.Index != i || g.Name != dev.Config.Name || g.UUID != dev.UUID || g.CCMajor != dev.Config.CudaMajor ||
			g.CCMinor != dev.Config.CudaMinor || g.MemoryTotalBytes != dev.Config.MemoryMB<<20 || g.Err != "" {
			t.Errorf("GPU %d = %+v, want the mock's %s", i, g, dev.Config.Name)
		}
	}
	if rep.GPUs[0].Utilization != 0.37 || rep.GPUs[1].Utilization != -1 {
		t.Errorf("utilization %v, %v; want 0.37 and -1 (unsupported)", rep.GPUs[0].Utilization, rep.GPUs[1].Utilization)
	}
	if rep.GPUs[1].MemoryUsedBytes != 5<<30 || rep.GPUs[1].PCIBusID != "00000000:41:00.0" {
		t.Errorf("GPU 1 used %d bus %q", rep.GPUs[1].MemoryUsedBytes, rep.GPUs[1].PCIBusID)
	}
}

// A failing per-GPU call is reported on that GPU, and the query goes on.
func TestQueryNVMLDeviceError(t *testing.T) {
	srv := dgxa100.NewWithGPUs(gpus.A100_SXM4_40GB, gpus.A100_SXM4_40GB)
	d0 := srv.Devices[0].(*dgxa100.Device)
	d0.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST }
	for _, d := range srv.Devices {
		d.(*dgxa100.Device).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 100}, nvml.SUCCESS
		}
	}
	rep, err := QueryNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rep.GPUs[0].Err, "memory") || !strings.Contains(rep.GPUs[0].Err, "ERROR_GPU_IS_LOST") {
		t.Errorf("GPU 0 error %q, want the memory failure", rep.GPUs[0].Err)
	}
	if rep.GPUs[0].Name != d0.Config.Name || rep.GPUs[1].Err != "" || rep.GPUs[1].Utilization != 1 {
		t.Errorf("other fields lost: %+v", rep.GPUs)
	}
}

// After a failed Init nothing else may be called: with the real go-nvml
// that would kill the process.
func TestQueryNVMLInitFailure(t *testing.T) {
	srv := dgxa100.New()
	srv.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	called := func(name string) { t.Errorf("%s called after a failed Init", name) }
	srv.ShutdownFunc = func() nvml.Return { called("Shutdown"); return nvml.SUCCESS }
	srv.SystemGetDriverVersionFunc = func() (string, nvml.Return) { called("SystemGetDriverVersion"); return "", nvml.SUCCESS }
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { called("DeviceGetCount"); return 0, nvml.SUCCESS }
	_, err := QueryNVML(srv)
	if err == nil || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") || !strings.Contains(err.Error(), "NVIDIA driver") {
		t.Errorf("QueryNVML = %v, want the Init failure with a hint", err)
	}
}

// The real go-nvml without a library: an error, not a crash.
func TestQueryDefaultNVMLWithoutLibrary(t *testing.T) {
	_, err := QueryDefaultNVML(filepath.Join(t.TempDir(), "libnvidia-ml.so.1"))
	if err == nil || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("QueryDefaultNVML(missing) = %v, want ERROR_LIBRARY_NOT_FOUND", err)
	}
}
