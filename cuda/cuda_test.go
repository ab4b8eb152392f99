package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// loadMock builds a fresh mock driver with ndev devices and loads it.
func loadMock(t *testing.T, ndev int) *cuda.Driver {
	t.Helper()
	lib := cudatest.BuildMockDriver(t)
	t.Setenv(cudatest.EnvDevices, itoa(ndev))
	drv, err := cuda.Load(cuda.Options{Library: lib})
	if err != nil {
		t.Fatalf("load mock driver: %v", err)
	}
	return drv
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func openDevice(t *testing.T, drv *cuda.Driver, ordinal int) *cuda.Device {
	t.Helper()
	d, err := drv.Open(ordinal)
	if err != nil {
		t.Fatalf("open device %d: %v", ordinal, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close device %d: %v", ordinal, err)
		}
	})
	return d
}

func TestLoadMissingLibrary(t *testing.T) {
	missing := t.TempDir() + "/libcuda.so.1"
	_, err := cuda.Load(cuda.Options{Library: missing})
	if !errors.Is(err, cuda.ErrNotAvailable) {
		t.Fatalf("Load(missing) = %v, want ErrNotAvailable", err)
	}
	for _, want := range []string{missing, "NVIDIA driver", cuda.EnvLibrary} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLoadFromEnvironment(t *testing.T) {
	lib := cudatest.BuildMockDriver(t)
	t.Setenv(cudatest.EnvDevices, "1")
	t.Setenv(cuda.EnvLibrary, lib)
	drv, err := cuda.Load(cuda.Options{})
	if err != nil {
		t.Fatalf("Load with $%s: %v", cuda.EnvLibrary, err)
	}
	if drv.Path() != lib {
		t.Errorf("Path = %q, want %q", drv.Path(), lib)
	}
	// A failing override must not fall back to the default soname.
	t.Setenv(cuda.EnvLibrary, lib+".missing")
	if _, err := cuda.Load(cuda.Options{}); !errors.Is(err, cuda.ErrNotAvailable) || !strings.Contains(err.Error(), "$"+cuda.EnvLibrary) {
		t.Errorf("Load with a bad $%s = %v, want ErrNotAvailable naming the variable", cuda.EnvLibrary, err)
	}
}

func TestLoadReportsMissingSymbols(t *testing.T) {
	// A library with only cuInit and cuDriverGetVersion: too old or not a driver.
	lib := cudatest.BuildMockLibrary(t, "libcuda.so.1", []byte(
		"int cuInit(unsigned f) { (void)f; return 0; }\nint cuDriverGetVersion(int *v) { *v = 9000; return 0; }\n"))
	_, err := cuda.Load(cuda.Options{Library: lib})
	if !errors.Is(err, cuda.ErrNotAvailable) {
		t.Fatalf("Load = %v, want ErrNotAvailable", err)
	}
	for _, sym := range []string{"cuMemAlloc_v2", "cuLaunchKernel", "cuDevicePrimaryCtxRelease_v2", "cuEventElapsedTime"} {
		if !strings.Contains(err.Error(), sym) {
			t.Errorf("error does not list missing %s: %v", sym, err)
		}
	}
	if !strings.Contains(err.Error(), "a driver for CUDA 9.0") {
		t.Errorf("error does not give the CUDA release the driver reports: %v", err)
	}
	if strings.Contains(err.Error(), "cuInit,") {
		t.Errorf("error lists cuInit, which is present: %v", err)
	}
}

func TestNoDevice(t *testing.T) {
	drv := loadMock(t, 0)
	n, err := drv.DeviceCount()
	if err != nil || n != 0 {
		t.Fatalf("DeviceCount = %d, %v; want 0, nil", n, err)
	}
	if drv.Version() != cudatest.MockDriverVersion || drv.VersionString() != "12.4" {
		t.Errorf("Version = %d (%s), want %d (12.4)", drv.Version(), drv.VersionString(), cudatest.MockDriverVersion)
	}
	if _, err := drv.Open(0); err == nil {
		t.Errorf("Open(0) with no device succeeded")
	}
}

func TestDevices(t *testing.T) {
	drv := loadMock(t, 3)
	devs, err := drv.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 3 {
		t.Fatalf("%d devices, want 3", len(devs))
	}
	for i, got := range devs {
		want := cudatest.MockDeviceSpec(i)
		if got.Ordinal != i || got.Name != want.Name || got.PCIBusID != want.PCIBusID || got.Major != want.Major ||
			got.Minor != want.Minor || got.Multiprocessors != want.Multiprocessors ||
			got.TotalMemoryBytes != want.TotalMemoryBytes || got.MaxSharedPerBlockOptin != want.MaxSharedPerBlockOptin {
			t.Errorf("device %d = %+v, want %+v", i, got, want)
		}
		if got.SM() != want.Major*10+want.Minor {
			t.Errorf("device %d SM = %d", i, got.SM())
		}
	}
	_, err = drv.DeviceInfo(3)
	if !cuda.IsResult(err, cuda.ErrorInvalidDevice) || !strings.Contains(err.Error(), "CUDA_ERROR_INVALID_DEVICE") {
		t.Errorf("DeviceInfo(3) = %v, want CUDA_ERROR_INVALID_DEVICE", err)
	}
}

func TestMemoryRoundTrip(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	free0, total, err := d.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if total != cudatest.MockDeviceSpec(0).TotalMemoryBytes {
		t.Errorf("total = %d", total)
	}
	const n = 1000
	a, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	if free1, _, _ := d.MemInfo(); free0-free1 != 8*n {
		t.Errorf("free fell by %d after allocating %d bytes", free0-free1, 8*n)
	}
	src := make([]float32, n)
	for i := range src {
		src[i] = float32(i)*0.5 - 7
	}
	if err := d.CopyHtoD(a, cuda.Bytes(src)); err != nil {
		t.Fatal(err)
	}
	// b = [fill 100 floats of 2.5][a[100:]] through memset and a device copy.
	if err := d.MemsetD32(b, math.Float32bits(2.5), 100); err != nil {
		t.Fatal(err)
	}
	if err := d.CopyDtoD(b.Add(400), a.Add(400), 4*(n-100)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, n)
	if err := d.CopyDtoH(cuda.Bytes(got), b); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		want := src[i]
		if i < 100 {
			want = 2.5
		}
		if got[i] != want {
			t.Fatalf("b[%d] = %v, want %v", i, got[i], want)
		}
	}
	if err := d.MemsetD8(a.Add(3), 0xab, 5); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 12)
	if err := d.CopyDtoH(raw, a); err != nil {
		t.Fatal(err)
	}
	srcBytes := cuda.Bytes(src)
	for i, v := range raw {
		want := srcBytes[i]
		if i >= 3 && i < 8 {
			want = 0xab
		}
		if v != want {
			t.Errorf("byte %d = %#x, want %#x", i, v, want)
		}
	}
	// A copy that runs past the allocation is refused, not performed.
	if err := d.CopyDtoH(make([]byte, 8), a.Add(4*n-4)); !cuda.IsResult(err, cuda.ErrorInvalidValue) {
		t.Errorf("copy past the end = %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
	for _, p := range []cuda.DevicePtr{a, b} {
		if err := d.Free(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Free(a); !cuda.IsResult(err, cuda.ErrorInvalidValue) {
		t.Errorf("double free = %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
	if free2, _, _ := d.MemInfo(); free2 != free0 {
		t.Errorf("free = %d after freeing everything, want %d", free2, free0)
	}
}

func TestOutOfMemory(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	size := int(cudatest.MockDeviceSpec(0).TotalMemoryBytes) + 1
	_, err := d.Alloc(size)
	if !cuda.IsResult(err, cuda.ErrorOutOfMemory) {
		t.Fatalf("Alloc(%d) = %v, want CUDA_ERROR_OUT_OF_MEMORY", size, err)
	}
	for _, want := range []string{"cuMemAlloc_v2", itoa(size) + " bytes", "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := d.Alloc(0); err == nil {
		t.Errorf("Alloc(0) succeeded")
	}
}

// The primary context is current on each device's thread, and each
// device's calls run under its own context, whichever goroutine makes them.
func TestContextPerDeviceThread(t *testing.T) {
	drv := loadMock(t, 2)
	devs := []*cuda.Device{openDevice(t, drv, 0), openDevice(t, drv, 1)}
	if devs[0].PrimaryContext() == devs[1].PrimaryContext() || devs[0].PrimaryContext() == 0 {
		t.Fatalf("primary contexts %#x and %#x", devs[0].PrimaryContext(), devs[1].PrimaryContext())
	}
	for _, d := range devs {
		err := d.Do(func(c *cuda.Ctx) error {
			cur, err := c.CurrentContext()
			if err != nil {
				return err
			}
			if cur != d.PrimaryContext() {
				return fmt.Errorf("device %d: current context %#x, want %#x", d.Info().Ordinal, cur, d.PrimaryContext())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	free0 := make([]uint64, 2)
	for i, d := range devs {
		free0[i], _, _ = d.MemInfo()
	}
	// Memory accounting is per device in the mock, so an allocation made
	// under the wrong context would show up on the other device.
	p, err := devs[1].Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	f0, _, _ := devs[0].MemInfo()
	f1, _, _ := devs[1].MemInfo()
	if f0 != free0[0] || free0[1]-f1 != 1<<20 {
		t.Errorf("after 1 MiB on device 1: free %d/%d, was %d/%d", f0, f1, free0[0], free0[1])
	}
	if err := devs[1].Free(p); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			d := devs[g%2]
			for i := 0; i < 50; i++ {
				p, err := d.Alloc(256 * (1 + i%7))
				if err != nil {
					errs <- err
					return
				}
				runtime.Gosched()
				if err := d.MemsetD8(p, byte(g), 256); err != nil {
					errs <- err
					return
				}
				if err := d.Free(p); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, d := range devs {
		if f, _, _ := d.MemInfo(); f != free0[i] {
			t.Errorf("device %d: free %d after concurrent alloc/free, want %d", i, f, free0[i])
		}
	}
}

func TestCloseReleasesContext(t *testing.T) {
	drv := loadMock(t, 1)
	d, err := drv.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	free0, _, _ := d.MemInfo()
	if _, err := d.Alloc(4096); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := d.Alloc(16); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("Alloc after Close = %v, want ErrClosed", err)
	}
	// The last release of the primary context frees what it held.
	d2 := openDevice(t, drv, 0)
	if f, _, _ := d2.MemInfo(); f != free0 {
		t.Errorf("free after reopening = %d, want %d", f, free0)
	}
}

func TestDoPropagatesPanic(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		_ = d.Do(func(*cuda.Ctx) error { panic("boom") })
	}()
	if err := d.Synchronize(); err != nil {
		t.Errorf("device unusable after a panic in Do: %v", err)
	}
}

// A t.FailNow inside Do ends the caller's goroutine as it would outside,
// and the device reports itself closed rather than hanging.
func TestDoGoexit(t *testing.T) {
	drv := loadMock(t, 1)
	d, err := drv.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	returned := make(chan bool)
	go func() {
		defer func() { returned <- false }()
		_ = d.Do(func(*cuda.Ctx) error { runtime.Goexit(); return nil })
		returned <- true
	}()
	if <-returned {
		t.Fatal("Do returned normally after fn called runtime.Goexit")
	}
	if err := d.Synchronize(); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("Synchronize after the device thread ended = %v, want ErrClosed", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestAsyncCopiesAndStreams(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	const n = 64
	err := d.Do(func(c *cuda.Ctx) error {
		s, err := c.NewStream(true)
		if err != nil {
			return err
		}
		defer c.DestroyStream(s)
		h, err := c.AllocHost(8 * n)
		if err != nil {
			return err
		}
		defer c.FreeHost(h)
		in := h.Slice(0, 4*n)
		out := h.Slice(4*n, 4*n)
		for i, b := 0, in.Bytes(); i < len(b); i++ {
			b[i] = byte(3*i + 1)
		}
		p, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(p)
		if err := c.CopyHtoDAsync(p, in, s); err != nil {
			return err
		}
		if err := c.MemsetD8Async(p, 0x5a, 8, s); err != nil {
			return err
		}
		q, err := c.Alloc(4 * n)
		if err != nil {
			return err
		}
		defer c.Free(q)
		if err := c.CopyDtoDAsync(q, p, 4*n, s); err != nil {
			return err
		}
		if err := c.CopyDtoHAsync(out, q, s); err != nil {
			return err
		}
		if err := c.StreamSynchronize(s); err != nil {
			return err
		}
		for i, b := range out.Bytes() {
			want := byte(3*i + 1)
			if i < 8 {
				want = 0x5a
			}
			if b != want {
				return fmt.Errorf("out[%d] = %#x, want %#x", i, b, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StreamSynchronize(cuda.Stream(0)); err != nil {
		t.Errorf("default stream: %v", err)
	}
}

func TestEvents(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	start, err := d.NewEvent(true)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := d.NewEvent(true)
	plain, _ := d.NewEvent(false)
	s, err := d.NewStream(false)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := d.RecordEvent(start, s); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := d.RecordEvent(end, s); err != nil {
		t.Fatal(err)
	}
	wall := time.Since(t0)
	if err := d.EventSynchronize(end); err != nil {
		t.Fatal(err)
	}
	el, err := d.EventElapsed(start, end)
	if err != nil {
		t.Fatal(err)
	}
	if el < 5*time.Millisecond || el > wall+time.Millisecond {
		t.Errorf("elapsed %v, want within [5ms, %v]", el, wall)
	}
	if err := d.RecordEvent(plain, s); err != nil {
		t.Fatal(err)
	}
	if err := d.StreamWaitEvent(s, plain); err != nil {
		t.Fatal(err)
	}
	if _, err := d.EventElapsed(start, plain); !cuda.IsResult(err, cuda.ErrorInvalidHandle) {
		t.Errorf("elapsed to a non-timing event = %v, want CUDA_ERROR_INVALID_HANDLE", err)
	}
	for _, e := range []cuda.Event{start, end, plain} {
		if err := d.DestroyEvent(e); err != nil {
			t.Error(err)
		}
	}
	if err := d.DestroyStream(s); err != nil {
		t.Error(err)
	}
}
