package cuda_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// testPTX declares the mock's kernels the way NVRTC's PTX does; the mock
// finds them by their .entry lines.
const testPTX = `.version 7.8
.target sm_80
.address_size 64

.visible .entry gt_test_vadd(.param .u64 c, .param .u64 a, .param .u64 b, .param .u32 n) { ret; }
.visible .entry gt_test_axpby(.param .u64 y, .param .u64 x, .param .f32 a, .param .f64 b, .param .u64 n) { ret; }
.visible .entry gt_test_fill2d(.param .u64 out, .param .u32 w, .param .u32 h, .param .u32 pitch) { ret; }
.visible .entry gt_test_unknown() { ret; }
`

func loadTestModule(t *testing.T, d *cuda.Device) cuda.Module {
	t.Helper()
	m, err := d.LoadModule([]byte(testPTX))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.UnloadModule(m); err != nil {
			t.Error(err)
		}
	})
	return m
}

func uploadF32(t *testing.T, d *cuda.Device, v []float32) cuda.DevicePtr {
	t.Helper()
	p, err := d.Alloc(4 * len(v))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyHtoD(p, cuda.Bytes(v)); err != nil {
		t.Fatal(err)
	}
	return p
}

func downloadF32(t *testing.T, d *cuda.Device, p cuda.DevicePtr, n int) []float32 {
	t.Helper()
	v := make([]float32, n)
	if err := d.CopyDtoH(cuda.Bytes(v), p); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLaunchVAdd(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	f, err := d.Function(loadTestModule(t, d), cudatest.KernelVAdd)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i] = float32(i) * 0.25
		b[i] = 3 - float32(i)
	}
	pa, pb := uploadF32(t, d, a), uploadF32(t, d, b)
	pc := uploadF32(t, d, make([]float32, n))
	// ceil(n/128) blocks of 128 threads cover every element.
	cfg := cuda.LaunchConfig{Grid: cuda.Dim3{X: (n + 127) / 128}, Block: cuda.Dim3{X: 128}}
	if err := d.Launch(f, cfg, pc, pa, pb, uint32(n)); err != nil {
		t.Fatal(err)
	}
	for i, v := range downloadF32(t, d, pc, n) {
		if v != a[i]+b[i] {
			t.Fatalf("c[%d] = %v, want %v", i, v, a[i]+b[i])
		}
	}
	// 2 blocks of 128 threads reach only the first 256 elements.
	if err := d.MemsetD8(pc, 0, 4*n); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(f, cuda.LaunchConfig{Grid: cuda.Dim3{X: 2}, Block: cuda.Dim3{X: 128}}, pc, pa, pb, uint32(n)); err != nil {
		t.Fatal(err)
	}
	for i, v := range downloadF32(t, d, pc, n) {
		want := float32(0)
		if i < 256 {
			want = a[i] + b[i]
		}
		if v != want {
			t.Fatalf("partial grid: c[%d] = %v, want %v", i, v, want)
		}
	}
}

func TestLaunchMixedScalarArguments(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	f, err := d.Function(loadTestModule(t, d), cudatest.KernelAxpby)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i%17) - 8.5
		y[i] = float32(i) / 7
	}
	px, py := uploadF32(t, d, x), uploadF32(t, d, y)
	a, b := float32(1.75), -0.3125
	if err := d.Launch(f, cuda.LaunchConfig{Grid: cuda.Dim3{X: 3}, Block: cuda.Dim3{X: 128}}, py, px, a, b, int64(n)); err != nil {
		t.Fatal(err)
	}
	for i, v := range downloadF32(t, d, py, n) {
		want := float32(float64(a)*float64(x[i]) + b*float64(y[i]))
		if v != want {
			t.Fatalf("y[%d] = %v, want %v", i, v, want)
		}
	}
}

func TestLaunch2DGrid(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	f, err := d.Function(loadTestModule(t, d), cudatest.KernelFill2D)
	if err != nil {
		t.Fatal(err)
	}
	const w, h, pitch = 40, 13, 48
	out, err := d.Alloc(4 * pitch * h)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.MemsetD8(out, 0xff, 4*pitch*h); err != nil { // every int = -1
		t.Fatal(err)
	}
	// 3x2 blocks of 16x8 threads: 48 columns, 16 rows, so x < 40 and y < 13 bound it.
	cfg := cuda.LaunchConfig{Grid: cuda.Dim3{X: 3, Y: 2}, Block: cuda.Dim3{X: 16, Y: 8}}
	if err := d.Launch(f, cfg, out, int32(w), int32(h), int32(pitch)); err != nil {
		t.Fatal(err)
	}
	got := make([]int32, pitch*h)
	if err := d.CopyDtoH(cuda.Bytes(got), out); err != nil {
		t.Fatal(err)
	}
	for y := 0; y < h; y++ {
		for x := 0; x < pitch; x++ {
			want := int32(-1)
			if x < w {
				want = int32(1000*y + x)
			}
			if got[y*pitch+x] != want {
				t.Fatalf("out[%d][%d] = %d, want %d", y, x, got[y*pitch+x], want)
			}
		}
	}
}

func TestLaunchErrors(t *testing.T) {
	drv := loadMock(t, 1)
	d := openDevice(t, drv, 0)
	m := loadTestModule(t, d)
	f, err := d.Function(m, cudatest.KernelVAdd)
	if err != nil {
		t.Fatal(err)
	}
	p, err := d.Alloc(64 * 4)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cuda.LaunchConfig{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 128}}

	if err := d.Launch(f, cfg, p, p, p, 128); err == nil || !strings.Contains(err.Error(), "argument 3 has type int") {
		t.Errorf("launch with a Go int = %v, want a type error", err)
	}
	// 128 threads over a 64-float buffer: the kernel touches memory past it.
	if err := d.Launch(f, cfg, p, p, p, uint32(128)); !cuda.IsResult(err, cuda.ErrorIllegalAddress) {
		t.Errorf("launch past a buffer = %v, want CUDA_ERROR_ILLEGAL_ADDRESS", err)
	}
	if err := d.Launch(f, cuda.LaunchConfig{Block: cuda.Dim3{X: 2048}}, p, p, p, uint32(1)); !cuda.IsResult(err, cuda.ErrorInvalidValue) ||
		!strings.Contains(err.Error(), "block 2048x1x1") {
		t.Errorf("launch with 2048 threads per block = %v, want CUDA_ERROR_INVALID_VALUE naming the geometry", err)
	}

	// Above 48 KiB of dynamic shared memory a kernel must opt in, up to the device's limit.
	big := cuda.LaunchConfig{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 64}, SharedMemBytes: 96 << 10}
	if err := d.Launch(f, big, p, p, p, uint32(64)); !cuda.IsResult(err, cuda.ErrorInvalidValue) {
		t.Errorf("96 KiB shared without opting in = %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
	if err := d.SetMaxDynamicSharedMemory(f, 96<<10); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(f, big, p, p, p, uint32(64)); err != nil {
		t.Errorf("96 KiB shared after opting in: %v", err)
	}
	if err := d.SetMaxDynamicSharedMemory(f, d.Info().MaxSharedPerBlockOptin+1); !cuda.IsResult(err, cuda.ErrorInvalidValue) {
		t.Errorf("opting in above the device limit = %v, want CUDA_ERROR_INVALID_VALUE", err)
	}

	if _, err := d.Function(m, "no_such_kernel"); !cuda.IsResult(err, cuda.ErrorNotFound) || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("Function(no_such_kernel) = %v, want CUDA_ERROR_NOT_FOUND naming it", err)
	}
	u, err := d.Function(m, "gt_test_unknown")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(u, cfg); !cuda.IsResult(err, cuda.ErrorNotSupported) {
		t.Errorf("launch of a kernel the mock cannot run = %v, want CUDA_ERROR_NOT_SUPPORTED", err)
	}
}

func TestLoadModuleErrorsCarryJITLog(t *testing.T) {
	drv := loadMock(t, 2)
	d0 := openDevice(t, drv, 0)
	d1 := openDevice(t, drv, 1)
	sm90 := strings.Replace(testPTX, ".target sm_80", ".target sm_90", 1)
	// sm_90 code loads on the sm_90 device and not on the sm_80 one.
	m, err := d1.LoadModule([]byte(sm90))
	if err != nil {
		t.Fatalf("sm_90 PTX on sm_90: %v", err)
	}
	if err := d1.UnloadModule(m); err != nil {
		t.Fatal(err)
	}
	_, err = d0.LoadModule([]byte(sm90))
	var e *cuda.Error
	if !errors.As(err, &e) || !strings.Contains(e.Log, "sm_90") || !strings.Contains(err.Error(), e.Log) {
		t.Errorf("sm_90 PTX on sm_80 = %v, want an error carrying the JIT log", err)
	}
	_, err = d0.LoadModule([]byte("\x7fELF\x02\x01\x01"))
	if !cuda.IsResult(err, cuda.ErrorInvalidImage) || !strings.Contains(err.Error(), "CUBIN") {
		t.Errorf("CUBIN on the mock = %v, want CUDA_ERROR_INVALID_IMAGE naming the image kind", err)
	}
	if _, err := d0.LoadModule([]byte("not ptx")); !cuda.IsResult(err, cuda.ErrorInvalidPTX) {
		t.Errorf("garbage image = %v, want CUDA_ERROR_INVALID_PTX", err)
	}
}

func TestBytesView(t *testing.T) {
	v := []float32{1, -2, float32(math.Inf(1))}
	b := cuda.Bytes(v)
	if len(b) != 12 {
		t.Fatalf("len = %d", len(b))
	}
	for i, x := range v {
		bits := uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
		if bits != math.Float32bits(x) {
			t.Errorf("element %d bits %#x, want %#x", i, bits, math.Float32bits(x))
		}
	}
	if cuda.Bytes([]int64(nil)) != nil {
		t.Errorf("Bytes(nil) != nil")
	}
}
