package cublas

import (
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// mockDevice opens device 0 of a fresh mock CUDA driver, whose device
// pointers are host pointers the mock cuBLAS computes on.
func mockDevice(t *testing.T) *cuda.Device {
	t.Helper()
	drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t)})
	if err != nil {
		t.Fatalf("load mock driver: %v", err)
	}
	dev, err := drv.Open(0)
	if err != nil {
		t.Fatalf("open mock device: %v", err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("close device: %v", err)
		}
	})
	return dev
}

// mockEnv is a device with a cuBLAS handle of the mock library on it.
type mockEnv struct {
	dev *cuda.Device
	lib *Library
	h   *Handle
}

// newMockEnv builds the mock cuBLAS (with defines), loads it through
// $GOTRAIN_LIBCUBLAS as a deployment would, and creates a handle on the
// device's thread.
func newMockEnv(t *testing.T, defines ...string) *mockEnv {
	t.Helper()
	dev := mockDevice(t)
	t.Setenv(EnvLibrary, cudatest.BuildMockCUBLAS(t, defines...))
	lib, err := Load(LoadOptions{})
	if err != nil {
		t.Fatalf("load mock cuBLAS: %v", err)
	}
	e := &mockEnv{dev: dev, lib: lib}
	e.do(t, func(*cuda.Ctx) error {
		e.h, err = lib.NewHandle()
		return err
	})
	t.Cleanup(func() {
		if err := dev.Do(func(*cuda.Ctx) error { return e.h.Close() }); err != nil && err != ErrClosed {
			t.Errorf("close handle: %v", err)
		}
	})
	return e
}

// do runs fn on the device's thread and fails the test on error.
func (e *mockEnv) do(t *testing.T, fn func(*cuda.Ctx) error) {
	t.Helper()
	if err := e.dev.Do(fn); err != nil {
		t.Fatal(err)
	}
}

// upload copies host data to new device memory, freed at the end of the test.
func upload[T cuda.Elem](t *testing.T, dev *cuda.Device, host []T) cuda.DevicePtr {
	t.Helper()
	b := cuda.Bytes(host)
	p, err := dev.Alloc(max(len(b), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Free(p) })
	if len(b) > 0 {
		if err := dev.CopyHtoD(p, b); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// download reads n elements back from device memory.
func download[T cuda.Elem](t *testing.T, dev *cuda.Device, p cuda.DevicePtr, n int) []T {
	t.Helper()
	out := make([]T, n)
	if n > 0 {
		if err := dev.CopyDtoH(cuda.Bytes(out), p); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
