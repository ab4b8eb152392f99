package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// Options.AllowTF32 moves every GEMM with fp32 inputs (linear layers
// through cuBLAS and cuBLASLt, attention's batched GEMMs) to
// CUBLAS_COMPUTE_32F_FAST_TF32, and leaves bf16 GEMMs on
// CUBLAS_COMPUTE_32F; without it fp32 GEMMs stay true fp32.
func TestAllowTF32ChoosesTheComputeType(t *testing.T) {
	cnt := cudatest.NewCounters(t)
	e := newEnv(t)
	const N, C, OC, B, T, NH = 6, 16, 24, 1, 6, 2
	r := rand.New(rand.NewPCG(3, 3))
	for _, tc := range []struct {
		tf32, lt bool
		dt       backend.DType
		want     cudatest.GEMMCompute
	}{
		{false, true, backend.F32, cudatest.Compute32F},
		{true, true, backend.F32, cudatest.Compute32FFastTF32},
		{true, false, backend.F32, cudatest.Compute32FFastTF32},
		{true, true, backend.BF16, cudatest.Compute32F},
	} {
		o := Options{Device: e.dev, Compiler: e.comp, BLAS: e.blas, Host: newHost(), AllowTF32: tc.tf32}
		if tc.lt {
			o.BLASLt = e.lt
		}
		g := e.newBackend(t, o)
		dt := tc.dt
		inp, w := upload(t, g, dt, normals(r, N*C)), upload(t, g, dt, normals(r, OC*C))
		bias, out := upload(t, g, dt, normals(r, OC)), upload(t, g, dt, make([]float32, N*OC))
		dinp, dw, db := upload(t, g, dt, make([]float32, N*C)), upload(t, g, dt, make([]float32, OC*C)), upload(t, g, dt, make([]float32, OC))
		qkv, att := upload(t, g, dt, normals(r, B*T*3*C)), upload(t, g, dt, make([]float32, B*T*C))
		lse, dqkv := upload(t, g, backend.F32, make([]float32, B*NH*T)), upload(t, g, dt, make([]float32, B*T*3*C))
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
		c0 := cnt.Snapshot(t)
		g.MatmulForward(out, inp, w, bias, N, C, OC)
		g.MatmulBackward(dinp, dw, db, out, inp, w, N, C, OC)
		g.AttentionForward(att, lse, qkv, B, T, NH, NH, C/NH)
		g.AttentionBackward(dqkv, att, att, qkv, lse, B, T, NH, NH, C/NH)
		if err := g.Sync(); err != nil {
			t.Fatal(err)
		}
		d := cnt.Snapshot(t).Sub(c0)
		in := cudatest.InF32
		if dt == backend.BF16 {
			in = cudatest.InBF16
		}
		if n, all := d.GEMMs[in][tc.want], d.AllGEMMCalls(); n == 0 || n != all {
			t.Errorf("AllowTF32 %v, cuBLASLt %v, %s: %d of %d GEMMs are %s/%s; detail: %s", tc.tf32, tc.lt, dt, n, all,
				in, tc.want, d.Detail())
		}
	}
}
