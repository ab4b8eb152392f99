package cuda

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/kernels"
)

func TestDTypeCodesMatchBackend(t *testing.T) {
	pairs := []struct {
		k kernels.DType
		b backend.DType
	}{{kernels.F32, backend.F32}, {kernels.BF16, backend.BF16}, {kernels.F16, backend.F16},
		{kernels.I32, backend.I32}, {kernels.U16, backend.U16}}
	for _, p := range pairs {
		if int(p.k) != int(p.b) || p.k.Size() != p.b.Size() {
			t.Errorf("kernels dtype %d (size %d) vs backend %s = %d (size %d)", p.k, p.k.Size(), p.b, p.b, p.b.Size())
		}
	}
}

// Every device byte the backend allocates (buffers, scratch) is returned
// by Close, as the mock driver's cuMemGetInfo sees it, and the accounting
// matches what was asked for.
func TestAllocationBalance(t *testing.T) {
	e := newEnv(t)
	free0, _, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Device: e.dev, Compiler: e.comp, BLAS: e.blas, Host: newHost()})
	if err != nil {
		t.Fatal(err)
	}
	x, err := b.Alloc(backend.Device, backend.Params, backend.BF16, 1000)
	if err != nil {
		t.Fatal(err)
	}
	y, err := b.Alloc(backend.Device, backend.Grads, backend.F32, 1000)
	if err != nil {
		t.Fatal(err)
	}
	h, err := b.Alloc(backend.HostPinned, backend.Optimizer, backend.F32, 500)
	if err != nil {
		t.Fatal(err)
	}
	st := b.Memory()
	if st.Current[backend.Device][backend.Params] != 2000 || st.Current[backend.Device][backend.Grads] != 4000 ||
		st.Current[backend.HostPinned][backend.Optimizer] != 2000 {
		t.Errorf("accounting: %+v", st.Current)
	}
	// A cast through scratch: x (bf16) → y (fp32), and a sum of squares.
	b.Copy(y, x)
	if s := b.SumSquares(y); s != 0 {
		t.Errorf("sum of squares of zeroed memory = %g", s)
	}
	if b.Memory().Current[backend.Device][backend.Workspace] == 0 {
		t.Errorf("scratch is not accounted under workspace")
	}
	free1, _, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free1 >= free0 {
		t.Errorf("free device memory %d after allocating, %d before", free1, free0)
	}
	b.Free(x)
	b.Free(h)
	// y stays allocated: Close frees what is left.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	free2, _, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free2 != free0 {
		t.Errorf("free device memory %d after Close, %d before New: %d bytes leaked", free2, free0, int64(free0)-int64(free2))
	}
}

// cuBLAS runs on the backend's compute stream, so GEMMs and kernels are
// ordered without synchronisation.
func TestCUBLASUsesTheComputeStream(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	var got uintptr
	if err := b.gemm(func(h *cublas.Handle) error {
		s, err := h.Stream()
		got = uintptr(s)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil { // runs the deferred GEMM call
		t.Fatal(err)
	}
	if got != uintptr(b.Stream()) || got == 0 {
		t.Errorf("cuBLAS stream %#x, compute stream %#x", got, b.Stream())
	}
}

// Ops whose buffers all live in host pools (ZeRO offload) run on the host
// backend and give what the same ops give on the device.
func TestHostPoolOpsMatchDevice(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	const n = 1037
	vals := func(seed float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(seed*float64(i+1)) * 0.3)
		}
		return v
	}
	type set struct{ param, master, grad, m, v backend.Buffer }
	mk := func(pool backend.Pool) set {
		var s set
		var err error
		for _, p := range []struct {
			dst *backend.Buffer
			dt  backend.DType
			v   []float32
		}{{&s.param, backend.BF16, vals(1)}, {&s.master, backend.F32, vals(1)}, {&s.grad, backend.F32, vals(2)},
			{&s.m, backend.F32, vals(3)}, {&s.v, backend.F32, vals(4)}} {
			if *p.dst, err = b.Alloc(pool, backend.Optimizer, p.dt, n); err != nil {
				t.Fatal(err)
			}
			v := p.v
			if p.dst == &s.v {
				for i := range v {
					v[i] = v[i] * v[i]
				}
			}
			if err := backend.WriteF32(b, *p.dst, v); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	dev, host := mk(backend.Device), mk(backend.HostPinned)
	hp := backend.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, GradScale: 0.25, Step: 2}
	for _, s := range []set{dev, host} {
		b.AdamW(s.param, s.master, s.grad, s.m, s.v, hp)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, pick := range []func(s set) backend.Buffer{
		func(s set) backend.Buffer { return s.param }, func(s set) backend.Buffer { return s.master },
		func(s set) backend.Buffer { return s.m }, func(s set) backend.Buffer { return s.v }} {
		d, err := backend.ReadF32(b, pick(dev))
		if err != nil {
			t.Fatal(err)
		}
		h, err := backend.ReadF32(b, pick(host))
		if err != nil {
			t.Fatal(err)
		}
		for i := range d {
			if math.Abs(float64(d[i]-h[i])) > 1e-6*math.Max(1, math.Abs(float64(h[i]))) {
				t.Fatalf("%s[%d]: device %g host %g", pick(dev).DType(), i, d[i], h[i])
			}
		}
	}
	if sd, sh := b.SumSquares(dev.grad), b.SumSquares(host.grad); math.Abs(sd-sh) > 1e-12*sh {
		t.Errorf("sum of squares: device %.17g host %.17g", sd, sh)
	}
	// Host → device with a cast, and back.
	b.Copy(dev.param, host.master)
	back, err := b.Alloc(backend.Host, backend.Workspace, backend.F32, n)
	if err != nil {
		t.Fatal(err)
	}
	b.Copy(back, dev.param)
	got, err := backend.ReadF32(b, back)
	if err != nil {
		t.Fatal(err)
	}
	want, err := backend.ReadF32(b, host.master)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if r := backend.F32FromBF16(backend.BF16FromF32(want[i])); got[i] != r {
			t.Fatalf("host fp32 → device bf16 → host fp32 [%d]: %g, want %g", i, got[i], r)
		}
	}
	if b.NonFinite(host.grad) {
		t.Errorf("NonFinite on a finite host buffer")
	}
}

// The fused residual add + LayerNorm gives the same bits as Add followed by
// LayerNormForward on this backend, also when the residual aliases an input.
func TestResidualLayerNormIsBitIdenticalToTwoOps(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	const N, C = 19, 45
	for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16} {
		alloc := func(d backend.DType, n int, seed float64) backend.Buffer {
			x, err := b.Alloc(backend.Device, backend.Activations, d, n)
			if err != nil {
				t.Fatal(err)
			}
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(math.Sin(seed*float64(i+3)) + 0.25*seed)
			}
			if seed != 0 {
				if err := backend.WriteF32(b, x, v); err != nil {
					t.Fatal(err)
				}
			}
			return x
		}
		xa, xb, w, bias := alloc(dt, N*C, 1.3), alloc(dt, N*C, 0.7), alloc(dt, C, 2.1), alloc(dt, C, 0.4)
		xa2 := alloc(dt, N*C, 1.3)
		res, out, mean, rstd := alloc(dt, N*C, 0), alloc(dt, N*C, 0), alloc(backend.F32, N, 0), alloc(backend.F32, N, 0)
		out2, mean2, rstd2 := alloc(dt, N*C, 0), alloc(backend.F32, N, 0), alloc(backend.F32, N, 0)
		b.Add(res, xa, xb, N*C)
		b.LayerNormForward(out, mean, rstd, res, w, bias, N, C)
		// Fused, in place over a copy of a.
		b.ResidualLayerNormForward(xa2, out2, mean2, rstd2, xa2, xb, w, bias, N, C)
		for _, pair := range [][2]backend.Buffer{{res, xa2}, {out, out2}, {mean, mean2}, {rstd, rstd2}} {
			raw := func(x backend.Buffer) []byte {
				out := make([]byte, x.Bytes())
				if err := b.Download(out, x); err != nil {
					t.Fatal(err)
				}
				return out
			}
			if string(raw(pair[0])) != string(raw(pair[1])) {
				t.Errorf("%s: fused %s differs from Add + LayerNormForward", dt, pair[0])
			}
		}
	}
}

// TestScratchExhaustionIsAnError: when the device cannot lend an op its
// workspace, the op queues nothing and Sync reports the allocation that
// failed; nothing panics.
func TestScratchExhaustionIsAnError(t *testing.T) {
	t.Setenv(cudatest.EnvMemory, strconv.Itoa(1<<20))
	e := newEnv(t)
	b, err := New(Options{Device: e.dev, Compiler: e.comp, BLAS: e.blas, Host: newHost()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const N, C = 64, 32
	alloc := func(cat backend.Category, dt backend.DType, n int) backend.Buffer {
		t.Helper()
		x, err := b.Alloc(backend.Device, cat, dt, n)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	dinp, dout, inp := alloc(backend.Activations, backend.F32, N*C), alloc(backend.Activations, backend.F32, N*C), alloc(backend.Activations, backend.F32, N*C)
	mean, rstd := alloc(backend.Activations, backend.F32, N), alloc(backend.Activations, backend.F32, N)
	w, dw, db := alloc(backend.Params, backend.F32, C), alloc(backend.Grads, backend.F32, C), alloc(backend.Grads, backend.F32, C)
	// Fill the rest of the device so no scratch block fits.
	free, _, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	fill := alloc(backend.Workspace, backend.U16, int(free/2)-128)
	defer b.Free(fill)
	b.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, C)
	err = b.Sync()
	if err == nil || !strings.Contains(err.Error(), "device workspace") {
		t.Fatalf("Sync after an op whose scratch did not fit: %v, want the allocation failure", err)
	}
}
