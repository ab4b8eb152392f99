package cudatest_test

import (
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

const vaddPTX = `.version 7.8
.target sm_80
.address_size 64

.visible .entry gt_test_vadd(.param .u64 c, .param .u64 a, .param .u64 b, .param .u32 n) { ret; }
`

// The counters count exactly the calls made through the real wrappers:
// a known sequence of driver calls, cuBLAS GEMMs and a cuBLASLt matmul
// gives known counts, by kind, and a call the mock refuses counts nothing.
func TestCountersCountTheCallsMade(t *testing.T) {
	cnt := cudatest.NewCounters(t)
	drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t)})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	t.Setenv(cublas.EnvLibrary, cudatest.BuildMockCUBLAS(t))
	blas, err := cublas.Load(cublas.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(cublas.EnvLtLibrary, cudatest.BuildMockCUBLASLt(t))
	lt, err := cublas.LoadLt(cublas.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := cnt.Snapshot(t)

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const n = 64
	a, err := dev.Alloc(4 * n)
	must(err)
	b, err := dev.Alloc(4 * n)
	must(err)
	c, err := dev.Alloc(4 * n)
	must(err)
	pinned, err := dev.AllocHost(4 * n)
	must(err)
	st, err := dev.NewStream(false)
	must(err)
	ev, err := dev.NewEvent(false)
	must(err)
	never, err := dev.NewEvent(false)
	must(err)
	must(dev.StreamWaitEvent(st, never)) // orders nothing: counted as a bug
	host := make([]byte, 4*n)
	must(dev.CopyHtoD(a, host))
	must(dev.CopyHtoD(b, host))
	must(dev.CopyDtoH(host, a))
	must(dev.CopyHtoDAsync(a, pinned, st))
	must(dev.MemsetD8Async(c, 0, 4*n, st))
	m, err := dev.LoadModule([]byte(vaddPTX))
	must(err)
	f, err := dev.Function(m, "gt_test_vadd")
	must(err)
	for range 3 {
		must(dev.Launch(f, cuda.LaunchConfig{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: n}, Stream: st}, c, a, b, uint32(n)))
	}
	// A launch the mock refuses (a block of 2048 threads) is no launch.
	if err := dev.Launch(f, cuda.LaunchConfig{Grid: cuda.Dim3{X: 1}, Block: cuda.Dim3{X: 2048}, Stream: st}, c, a, b, uint32(n)); err == nil {
		t.Fatal("a launch of 2048 threads per block succeeded")
	}
	must(dev.StreamSynchronize(st))
	must(dev.StreamSynchronize(st))
	must(dev.Synchronize())
	must(dev.RecordEvent(ev, st))
	must(dev.StreamWaitEvent(st, ev))
	must(dev.EventSynchronize(ev))
	for range 2 {
		if _, err := dev.StreamQuery(st); err != nil {
			t.Fatal(err)
		}
	}

	f32 := func(p cuda.DevicePtr, ld int) cublas.Matrix { return cublas.Matrix{Ptr: p, Type: cublas.R32F, LD: ld} }
	bf16 := func(p cuda.DevicePtr, ld int) cublas.Matrix { return cublas.Matrix{Ptr: p, Type: cublas.R16BF, LD: ld} }
	must(dev.Do(func(*cuda.Ctx) error {
		h, err := blas.NewHandle()
		if err != nil {
			return err
		}
		defer h.Close()
		for range 2 {
			if err := h.GemmEx(cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, f32(a, 4), f32(b, 4), 0, f32(c, 4), cublas.Compute32F); err != nil {
				return err
			}
		}
		if err := h.GemmEx(cublas.NoTrans, cublas.NoTrans, 4, 4, 4, 1, f32(a, 4), f32(b, 4), 0, f32(c, 4), cublas.Compute32FFastTF32); err != nil {
			return err
		}
		if err := h.GemmStridedBatchedEx(cublas.NoTrans, cublas.NoTrans, 2, 2, 2, 1, bf16(a, 2), 4, bf16(b, 2), 4, 0,
			f32(c, 2), 4, 3, cublas.Compute32F); err != nil {
			return err
		}
		lh, err := lt.NewHandle()
		if err != nil {
			return err
		}
		defer lh.Close()
		return lh.Matmul(cublas.LtMatmul{TransA: cublas.NoTrans, TransB: cublas.NoTrans, M: 4, N: 4, K: 4, Alpha: 1,
			A: bf16(a, 4), B: bf16(b, 4), C: bf16(c, 4), Stream: st, Compute: cublas.Compute32F})
	}))
	must(dev.DestroyEvent(ev))
	must(dev.DestroyEvent(never))
	must(dev.DestroyStream(st))
	must(dev.FreeHost(pinned))
	must(dev.Free(a))
	must(dev.UnloadModule(m))

	d := cnt.Snapshot(t).Sub(before)
	t.Log(d.Detail())
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"stream syncs", d.StreamSyncs, 2}, {"context syncs", d.ContextSyncs, 1}, {"event syncs", d.EventSyncs, 1},
		{"blocking DtoH", d.BlockingDtoH, 1}, {"blocking HtoD", d.BlockingHtoD, 2}, {"async copies", d.AsyncCopies, 1},
		{"memsets", d.Memsets, 1}, {"launches", d.Launches, 3},
		{"stream queries", d.StreamQueries, 2}, {"event records", d.EventRecords, 1},
		{"event waits", d.EventWaits, 2}, {"waits on unrecorded events", d.UnrecordedWaits, 1},
		{"device allocs", d.DeviceAllocs, 3}, {"pinned allocs", d.PinnedAllocs, 1},
		{"device frees", d.DeviceFrees, 1}, {"pinned frees", d.PinnedFrees, 1},
		{"host syncs", d.HostSyncs(), 5}, {"allocations", d.Allocations(), 4},
		{"fp32/32F GEMMs", d.GEMMs[cudatest.InF32][cudatest.Compute32F], 2},
		{"fp32/TF32 GEMMs", d.GEMMs[cudatest.InF32][cudatest.Compute32FFastTF32], 1},
		{"bf16/32F GEMM calls (one batch, one Lt)", d.GEMMs[cudatest.InBF16][cudatest.Compute32F], 2},
		{"bf16/32F products (3 + 1)", d.Products[cudatest.InBF16][cudatest.Compute32F], 4},
		{"fp32 GEMM calls", d.GEMMCalls(cudatest.InF32), 3}, {"all GEMM calls", d.AllGEMMCalls(), 5},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
	want := "bf16 step: 3 fp32 GEMMs, 5 host syncs, 4 allocations, 3 launches"
	if got := d.StepLine("bf16"); got != want {
		t.Errorf("StepLine = %q, want %q", got, want)
	}
}

// Without the variable the mocks count nothing, and a file that is not a
// counter file is an error, not zeros.
func TestCountersNeedTheirFile(t *testing.T) {
	cnt := cudatest.NewCounters(t)
	t.Setenv(cudatest.EnvCounters, "")
	drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t)})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := drv.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	p, err := dev.Alloc(256)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Synchronize(); err != nil {
		t.Fatal(err)
	}
	_ = dev.Free(p)
	if got := cnt.Snapshot(t); got != (cudatest.Counts{}) {
		t.Errorf("counted without %s: %s", cudatest.EnvCounters, got.Detail())
	}

	bad := &cudatest.Counters{}
	if _, err := bad.Read(); err == nil {
		t.Error("reading a counter file that does not exist succeeded")
	}
	if !strings.Contains(cnt.Path(), "mock-counters") {
		t.Errorf("Path() = %q", cnt.Path())
	}
}
