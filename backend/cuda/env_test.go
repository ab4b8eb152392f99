package cuda

import (
	"os"
	"strconv"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/cublas"
	cu "github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

// env is one mock GPU running the real kernels under emulation: the mock
// driver dispatches every launch to the emulation library built from
// kernels/*.cu, device pointers are host pointers, and the mock cuBLAS
// and cuBLASLt compute real GEMMs on them.
type env struct {
	emu  *emu.Library
	dev  *cu.Device   // devs[0]
	devs []*cu.Device // every mock device
	comp *kernels.Compiler
	blas *cublas.Library
	lt   *cublas.LtLibrary
}

// newEnv builds the environment. NVRTC compiles the program to PTX for
// the mock's sm_80 (the mock loads PTX only); without NVRTC the test is
// skipped unless GOTRAIN_REQUIRE_NVRTC=1.
func newEnv(t testing.TB) *env { return newEnvDevices(t, 1) }

// newEnvDevices is newEnv with n mock devices (even ordinals sm_80, odd
// sm_90), each launching on its own OS thread.
func newEnvDevices(t testing.TB, n int) *env {
	t.Helper()
	lib := emu.ForTest(t)
	t.Setenv(cudatest.EnvDevices, strconv.Itoa(n))
	drv, err := cu.Load(cu.Options{Library: cudatest.BuildMockDriver(t)})
	if err != nil {
		t.Fatal(err)
	}
	var devs []*cu.Device
	for i := 0; i < n; i++ {
		dev, err := drv.Open(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dev.Close() })
		devs = append(devs, dev)
	}
	nv, err := kernels.LoadNVRTC(kernels.NVRTCOptions{})
	if err != nil {
		if os.Getenv("GOTRAIN_REQUIRE_NVRTC") == "1" {
			t.Fatal(err)
		}
		t.Skipf("NVRTC not available, the kernels cannot be compiled: %v", err)
	}
	dir, err := kernels.DefaultCacheDir()
	if err != nil {
		dir = t.TempDir()
	}
	cache, err := kernels.OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	bl, err := cublas.Load(cublas.LoadOptions{Library: cudatest.BuildMockCUBLAS(t)})
	if err != nil {
		t.Fatal(err)
	}
	lt, err := cublas.LoadLt(cublas.LoadOptions{Library: cudatest.BuildMockCUBLASLt(t)})
	if err != nil {
		t.Fatal(err)
	}
	return &env{emu: lib, dev: devs[0], devs: devs, comp: kernels.NewCompiler(nv, cache), blas: bl, lt: lt}
}

func newHost() *cpu.Backend {
	g, _ := blas.Default(1)
	return cpu.New(cpu.Options{Gemm: g, Threads: 1})
}

// backend is a fresh Backend on the env's first device, with cuBLASLt,
// closed when t ends.
func (e *env) backend(t testing.TB) *Backend { return e.backendOn(t, e.dev) }

func (e *env) backendOn(t testing.TB, dev *cu.Device) *Backend {
	t.Helper()
	return e.newBackend(t, Options{Device: dev, Compiler: e.comp, BLAS: e.blas, BLASLt: e.lt, Host: newHost()})
}

// backendNoLt is a fresh Backend without cuBLASLt: GEMMs through cuBLAS,
// biases and GELU by kernels.
func (e *env) backendNoLt(t *testing.T) *Backend {
	return e.newBackend(t, Options{Device: e.dev, Compiler: e.comp, BLAS: e.blas, Host: newHost()})
}

func (e *env) newBackend(t testing.TB, o Options) *Backend {
	t.Helper()
	b, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

var _ backend.Backend = (*Backend)(nil)
