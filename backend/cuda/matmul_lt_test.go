package cuda

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/compare"
	"github.com/gotrain/gotrain/cublas"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// ltTrace points the mock cuBLASLt's trace at a fresh file and returns a
// function counting its lines by content ("heuristic", "matmul 4", …).
func ltTrace(t *testing.T) func() map[string]int {
	path := filepath.Join(t.TempDir(), "lt.trace")
	t.Setenv(cudatest.EnvCUBLASLtTrace, path)
	return func() map[string]int {
		n := map[string]int{}
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				n[l]++
			}
		}
		return n
	}
}

// upF32 uploads vals into a new device buffer of dt of b.
func upF32(t *testing.T, b backend.Backend, dt backend.DType, vals []float32) backend.Buffer {
	t.Helper()
	x, err := b.Alloc(backend.Device, backend.Activations, dt, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Free(x) })
	if err := backend.WriteF32(b, x, vals); err != nil {
		t.Fatal(err)
	}
	return x
}

func downF32(t *testing.T, b backend.Backend, x backend.Buffer) []float32 {
	t.Helper()
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	v, err := backend.ReadF32(b, x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func gaussF32(r *rand.Rand, n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * sd)
	}
	return v
}

func sameBits32(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// A linear layer whose bias has the output's dtype adds it in the GEMM's
// cuBLASLt epilogue: one matmul with the BIAS epilogue (4), one heuristic
// query for repeated calls of a shape, no bias kernel, and the same bits
// as the cuBLAS GEMM plus bias kernel it replaces. A bias view that is not
// 16-byte aligned goes the kernel path, with the same result.
func TestMatmulBiasInTheLtEpilogue(t *testing.T) {
	count := ltTrace(t)
	e := newEnv(t)
	lt, plain := e.backend(t), e.backendNoLt(t)
	const N, C, OC = 7, 24, 40
	r := rand.New(rand.NewPCG(4, 4))
	inV, wV, bV := gaussF32(r, N*C, 1), gaussF32(r, OC*C, 0.2), gaussF32(r, OC, 0.5)
	for _, dt := range []backend.DType{backend.F32, backend.BF16} {
		before := count()
		kernelsBefore := e.emu.Launches("gt_matmul_epilogue")
		run := func(b backend.Backend, biasOff int) []float32 {
			in, w := upF32(t, b, dt, inV), upF32(t, b, dt, wV)
			// The view at biasOff holds bV[:OC] either way.
			bias := upF32(t, b, dt, append(make([]float32, biasOff), bV...)).Slice(biasOff, OC)
			out := upF32(t, b, dt, make([]float32, N*OC))
			b.MatmulForward(out, in, w, bias, N, C, OC)
			return downF32(t, b, out)
		}
		want := run(plain, 0)
		for i := 0; i < 3; i++ {
			if got := run(lt, 0); !sameBits32(got, want) {
				t.Errorf("%s: the bias epilogue's result differs from GEMM + bias kernel", dt)
			}
		}
		after := count()
		if d := after["matmul 4"] - before["matmul 4"]; d != 3 {
			t.Errorf("%s: %d BIAS-epilogue matmuls for 3 linear layers", dt, d)
		}
		if d := after["heuristic"] - before["heuristic"]; d != 1 {
			t.Errorf("%s: %d heuristic queries for one shape", dt, d)
		}
		if d := e.emu.Launches("gt_matmul_epilogue") - kernelsBefore; d != 1 {
			t.Errorf("%s: the bias kernel ran %d times; want once, for the backend without cuBLASLt", dt, d)
		}
		if got := run(lt, 1); !sameBits32(got, want) {
			t.Errorf("%s: with a misaligned bias view, the result differs", dt)
		}
		if d := e.emu.Launches("gt_matmul_epilogue") - kernelsBefore; d != 2 {
			t.Errorf("%s: a misaligned bias did not go the kernel path", dt)
		}
	}
}

// MatmulGeluForward is one cuBLASLt GEMM (GELU_AUX_BIAS, 164) when OC is a
// multiple of 8: pre is MatmulForward's result bit for bit, out is GELU of
// it (the CPU backend's GELU within compare's tolerance; for bf16 the GELU
// of pre before its rounding). Other shapes run the two ops, bit for bit.
func TestMatmulGeluForward(t *testing.T) {
	count := ltTrace(t)
	e := newEnv(t)
	b, host := e.backend(t), newHost()
	r := rand.New(rand.NewPCG(8, 1))
	for _, dt := range []backend.DType{backend.F32, backend.BF16} {
		for _, OC := range []int{16, 12} {
			const N, C = 5, 20
			inV, wV, bV := gaussF32(r, N*C, 1), gaussF32(r, OC*C, 0.3), gaussF32(r, OC, 0.5)
			before := count()["matmul 164"]
			in, w, bias := upF32(t, b, dt, inV), upF32(t, b, dt, wV), upF32(t, b, dt, bV)
			out, pre := upF32(t, b, dt, make([]float32, N*OC)), upF32(t, b, dt, make([]float32, N*OC))
			b.MatmulGeluForward(out, pre, in, w, bias, N, C, OC)
			gotOut, gotPre := downF32(t, b, out), downF32(t, b, pre)
			fused := count()["matmul 164"] - before
			if want := OC%8 == 0; (fused == 1) != want || fused > 1 {
				t.Errorf("%s OC=%d: %d GELU_AUX_BIAS matmuls, want fused=%v", dt, OC, fused, want)
			}
			// The two ops on this backend.
			pre2, out2 := upF32(t, b, dt, make([]float32, N*OC)), upF32(t, b, dt, make([]float32, N*OC))
			b.MatmulForward(pre2, in, w, bias, N, C, OC)
			b.GeluForward(out2, pre2, N*OC)
			if !sameBits32(gotPre, downF32(t, b, pre2)) {
				t.Errorf("%s OC=%d: pre differs from MatmulForward's", dt, OC)
			}
			if OC%8 != 0 && !sameBits32(gotOut, downF32(t, b, out2)) {
				t.Errorf("%s OC=%d: out differs from GeluForward's", dt, OC)
			}
			// The CPU backend's two ops.
			hin, hw, hb := upF32(t, host, dt, inV), upF32(t, host, dt, wV), upF32(t, host, dt, bV)
			hpre, hout := upF32(t, host, dt, make([]float32, N*OC)), upF32(t, host, dt, make([]float32, N*OC))
			host.MatmulForward(hpre, hin, hw, hb, N, C, OC)
			host.GeluForward(hout, hpre, N*OC)
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"pre", gotPre, downF32(t, host, hpre)}, {"out", gotOut, downF32(t, host, hout)}} {
				if bad := relOver(c.got, c.want, compare.Tol(dt)); bad != "" {
					t.Errorf("%s OC=%d: %s differs from the CPU backend: %s", dt, OC, c.name, bad)
				}
			}
		}
	}
}

// cuBLASLt's workspace is allocated on the first cuBLASLt GEMM (4 MiB on
// the mock's sm_80 device), accounted under Device/Workspace, and returned
// by Close with everything else.
func TestLtWorkspaceIsAccountedAndFreed(t *testing.T) {
	e := newEnv(t)
	free0, _, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Device: e.dev, Compiler: e.comp, BLAS: e.blas, BLASLt: e.lt, Host: newHost()})
	if err != nil {
		t.Fatal(err)
	}
	ws0 := b.Memory().Current[backend.Device][backend.Workspace]
	const N, C, OC = 3, 8, 8
	r := rand.New(rand.NewPCG(1, 1))
	// Buffers stay allocated: Close frees them.
	buf := func(n int) backend.Buffer {
		x, err := b.Alloc(backend.Device, backend.Activations, backend.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := backend.WriteF32(b, x, gaussF32(r, n, 1)); err != nil {
			t.Fatal(err)
		}
		return x
	}
	in, w, bias, out := buf(N*C), buf(OC*C), buf(OC), buf(N*OC)
	b.MatmulForward(out, in, w, bias, N, C, OC)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if d := b.Memory().Current[backend.Device][backend.Workspace] - ws0; d != 4<<20 {
		t.Errorf("workspace grew by %d bytes with the first cuBLASLt GEMM, want 4 MiB", d)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	free1, _, err := e.dev.MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if free1 != free0 {
		t.Errorf("free device memory %d after Close, %d before New", free1, free0)
	}
}

// When cuBLASLt has no algorithm for a product (the mock built with
// MOCK_LT_NO_ALGO has none for any), the linear layer and MatmulGeluForward
// run the cuBLAS GEMM and kernels instead, with no error and the same bits
// as a backend without cuBLASLt.
func TestLinearFallsBackWithoutLtAlgorithm(t *testing.T) {
	e := newEnv(t)
	noAlgo, err := cublas.LoadLt(cublas.LoadOptions{Library: cudatest.BuildMockCUBLASLt(t, "MOCK_LT_NO_ALGO")})
	if err != nil {
		t.Fatal(err)
	}
	lt := e.newBackend(t, Options{Device: e.dev, Compiler: e.comp, BLAS: e.blas, BLASLt: noAlgo, Host: newHost()})
	plain := e.backendNoLt(t)
	const N, C, OC = 4, 16, 24
	r := rand.New(rand.NewPCG(2, 7))
	inV, wV, bV := gaussF32(r, N*C, 1), gaussF32(r, OC*C, 0.3), gaussF32(r, OC, 0.5)
	for _, dt := range []backend.DType{backend.F32, backend.BF16} {
		run := func(b *Backend) (out, pre []float32) {
			in, w, bias := upF32(t, b, dt, inV), upF32(t, b, dt, wV), upF32(t, b, dt, bV)
			o, p := upF32(t, b, dt, make([]float32, N*OC)), upF32(t, b, dt, make([]float32, N*OC))
			for i := 0; i < 2; i++ { // the second time from the cached failure
				b.MatmulGeluForward(o, p, in, w, bias, N, C, OC)
			}
			return downF32(t, b, o), downF32(t, b, p)
		}
		gotOut, gotPre := run(lt)
		wantOut, wantPre := run(plain)
		if !sameBits32(gotOut, wantOut) || !sameBits32(gotPre, wantPre) {
			t.Errorf("%s: the fallback differs from the backend without cuBLASLt", dt)
		}
	}
	// cuBLASLt was asked once per shape and epilogue: GELU_AUX_BIAS and
	// BIAS, in two dtypes.
	if n := lt.lt.h.Plans(); n != 4 {
		t.Errorf("%d plans (failures) cached, want 4", n)
	}
}
