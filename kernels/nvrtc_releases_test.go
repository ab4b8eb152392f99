package kernels_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/kernels"
)

// loadMockNVRTC loads the mock NVRTC built as release major.minor with the
// given architecture list and extra defines.
func loadMockNVRTC(t *testing.T, major, minor int, archs string, defines ...string) *kernels.NVRTC {
	t.Helper()
	defines = append(defines, "MOCK_NVRTC_MAJOR="+strconv.Itoa(major), "MOCK_NVRTC_MINOR="+strconv.Itoa(minor),
		"MOCK_NVRTC_ARCHS="+archs)
	n, err := kernels.LoadNVRTC(kernels.NVRTCOptions{Library: cudatest.BuildMockNVRTC(t, defines...)})
	if err != nil {
		t.Fatalf("load mock NVRTC %d.%d: %v", major, minor, err)
	}
	return n
}

func parseArchs(t *testing.T, list string) []kernels.SM {
	t.Helper()
	var out []kernels.SM
	for _, f := range strings.Split(list, ",") {
		a, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, kernels.SM(a))
	}
	return out
}

// The targets gotrain builds for stay valid across the NVRTC releases
// users have: sm_80 and sm_90 (and sm_86) are CUBINs with NVRTC 12.4, 12.9
// and 13.0, whose architecture lists differ; a device newer than the list
// gets PTX for the newest architecture NVRTC has; a Thor device that a
// CUDA 12 driver reports as sm_101 gets compute_100 PTX from NVRTC 13,
// which calls it sm_110.
func TestBuildTargetsAcrossNVRTCReleases(t *testing.T) {
	src := vaddSource(t)
	for _, rel := range []struct {
		major, minor int
		archs        string
		cases        map[kernels.SM]kernels.Image // device arch -> the image's kind and arch
	}{
		{12, 4, cudatest.NVRTC124Archs, map[kernels.SM]kernels.Image{
			70: {Kind: kernels.CUBIN, Arch: 70}, 100: {Kind: kernels.PTX, Arch: 90}, 120: {Kind: kernels.PTX, Arch: 90}}},
		{12, 9, cudatest.NVRTC129Archs, map[kernels.SM]kernels.Image{
			101: {Kind: kernels.CUBIN, Arch: 101}, 120: {Kind: kernels.CUBIN, Arch: 120}, 130: {Kind: kernels.PTX, Arch: 121}}},
		{13, 0, cudatest.NVRTC130Archs, map[kernels.SM]kernels.Image{
			75: {Kind: kernels.CUBIN, Arch: 75}, 101: {Kind: kernels.PTX, Arch: 100}, 110: {Kind: kernels.CUBIN, Arch: 110},
			130: {Kind: kernels.PTX, Arch: 121}}},
	} {
		t.Run(strconv.Itoa(rel.major)+"."+strconv.Itoa(rel.minor), func(t *testing.T) {
			n := loadMockNVRTC(t, rel.major, rel.minor, rel.archs)
			if major, minor := n.Version(); major != rel.major || minor != rel.minor {
				t.Errorf("Version = %d.%d", major, minor)
			}
			if got, want := n.SupportedArchs(), parseArchs(t, rel.archs); !slices.Equal(got, want) {
				t.Errorf("SupportedArchs = %v, want %v", got, want)
			}
			c := kernels.NewCompiler(n, nil)
			for _, arch := range []kernels.SM{80, 86, 90} {
				img, err := c.Build(src, "vadd.cu", arch)
				if err != nil {
					t.Fatalf("Build for %s: %v", arch, err)
				}
				if img.Kind != kernels.CUBIN || img.Arch != arch {
					t.Fatalf("Build for %s = %s %s, want CUBIN %s", arch, img.Kind, img.Arch, arch)
				}
				checkCUBIN(t, img.Data, arch)
			}
			for arch, want := range rel.cases {
				img, err := c.Build(src, "vadd.cu", arch)
				if err != nil {
					t.Fatalf("Build for %s: %v", arch, err)
				}
				if img.Kind != want.Kind || img.Arch != want.Arch {
					t.Errorf("Build for %s = %s %s, want %s %s", arch, img.Kind, img.Arch, want.Kind, want.Arch)
				}
				if img.Kind == kernels.PTX {
					checkPTX(t, img.Data, want.Arch, cudatest.KernelVAdd)
				}
			}
		})
	}
}

// NVRTC 13 has nothing for a Volta or older device; the error says so and
// that an NVRTC 12 still compiles for it. NVRTC 12 does.
func TestVoltaNeedsNVRTC12(t *testing.T) {
	src := vaddSource(t)
	c13 := kernels.NewCompiler(loadMockNVRTC(t, 13, 0, cudatest.NVRTC130Archs), nil)
	_, err := c13.Build(src, "vadd.cu", 70)
	if err == nil {
		t.Fatal("NVRTC 13 built for sm_70")
	}
	for _, want := range []string{"sm_70", "CUDA 13 dropped", "NVRTC 12", kernels.EnvNVRTC + "=libnvrtc.so.12"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	c12 := kernels.NewCompiler(loadMockNVRTC(t, 12, 9, cudatest.NVRTC129Archs), nil)
	if img, err := c12.Build(src, "vadd.cu", 70); err != nil || img.Kind != kernels.CUBIN || img.Arch != 70 {
		t.Errorf("NVRTC 12.9 Build for sm_70 = %s %s, %v; want CUBIN sm_70", img.Kind, img.Arch, err)
	}
	// Older than any release supports: no hint to try another NVRTC.
	if _, err := c12.Build(src, "vadd.cu", 35); err == nil || strings.Contains(err.Error(), "CUDA 13 dropped") {
		t.Errorf("NVRTC 12.9 Build for sm_35 = %v, want an error without the CUDA 13 hint", err)
	}
}

// A CUBIN build asks NVRTC for the CUBIN only, so it works with an NVRTC
// that keeps no PTX for an sm_XX target; PTX builds are unaffected.
func TestCUBINBuildNeedsNoPTX(t *testing.T) {
	n := loadMockNVRTC(t, 13, 0, cudatest.NVRTC130Archs, "MOCK_NVRTC_NO_PTX_FOR_SM")
	src := vaddSource(t)
	img, err := n.Compile(src, "vadd.cu", 90, kernels.CUBIN)
	if err != nil {
		t.Fatalf("CUBIN for sm_90: %v", err)
	}
	checkCUBIN(t, img.Data, 90)
	ptx, err := n.Compile(src, "vadd.cu", 90, kernels.PTX)
	if err != nil {
		t.Fatalf("PTX for compute_90: %v", err)
	}
	checkPTX(t, ptx.Data, 90, cudatest.KernelVAdd)
}

// End to end on the mock driver's sm_90 device with NVRTC 13: the CUBIN
// Build picks is refused there (the mock runs only PTX), so Load falls
// back to compute_90 PTX, which loads and has the kernel.
func TestLoadOnDeviceWithNVRTC13(t *testing.T) {
	t.Setenv(cudatest.EnvDevices, "2")
	drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t, "MOCK_CUDA_DRIVER_VERSION=13000")})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Open(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	c := kernels.NewCompiler(loadMockNVRTC(t, 13, 0, cudatest.NVRTC130Archs), nil)
	m, err := c.Load(dev, vaddSource(t), "vadd.cu")
	if err != nil {
		t.Fatal(err)
	}
	if img := m.Image(); img.Kind != kernels.PTX || img.Arch != 90 {
		t.Errorf("loaded %s %s, want PTX compute_90", img.Kind, img.Arch)
	}
	if _, err := m.Function(cudatest.KernelVAdd); err != nil {
		t.Errorf("Function(%s): %v", cudatest.KernelVAdd, err)
	}
	if err := m.Unload(); err != nil {
		t.Error(err)
	}
}

// NVRTC 13 with a driver for CUDA 12: the driver reads neither its CUBIN
// nor its 9.x PTX, and the error says which library to change.
func TestNVRTC13OnCUDA12Driver(t *testing.T) {
	t.Setenv(cudatest.EnvDevices, "2")
	drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t)})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Open(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Error(err)
		}
	})
	c := kernels.NewCompiler(loadMockNVRTC(t, 13, 0, cudatest.NVRTC130Archs), nil)
	_, err = c.Load(dev, vaddSource(t), "vadd.cu")
	if !cuda.IsResult(err, cuda.ErrorUnsupportedPTX) {
		t.Fatalf("Load = %v, want CUDA_ERROR_UNSUPPORTED_PTX_VERSION", err)
	}
	for _, want := range []string{"NVRTC 13 is newer than the driver (CUDA 12.4)", kernels.EnvNVRTC + "=libnvrtc.so.12", "R580"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// NVRTC 12 output loads on the same driver.
	c12 := kernels.NewCompiler(loadMockNVRTC(t, 12, 4, cudatest.NVRTC124Archs), nil)
	m, err := c12.Load(dev, vaddSource(t), "vadd.cu")
	if err != nil {
		t.Fatalf("NVRTC 12.4 on a CUDA 12.4 driver: %v", err)
	}
	if err := m.Unload(); err != nil {
		t.Error(err)
	}
}
