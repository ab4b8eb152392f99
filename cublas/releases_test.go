package cublas

import (
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/cuda"
)

// cuBLAS and cuBLASLt 13 keep every declaration gotrain uses (checked
// against the CUDA 13.0 headers: prototypes, cudaDataType_t,
// cublasComputeType_t, the Lt attributes and epilogues, the heuristic
// result's layout). Mocks reporting 13.0.2 load, decode their versions,
// and run a bf16 GemmEx and a bf16 Lt matmul with a bias epilogue.
func TestCUBLAS13(t *testing.T) {
	e := newMockEnv(t, "MOCK_CUBLAS_MAJOR=13", "MOCK_CUBLAS_MINOR=0", "MOCK_CUBLAS_PATCH=2")
	if got, want := e.lib.Version(), (Version{13, 0, 2}); got != want {
		t.Errorf("cuBLAS Version() = %v, want %v", got, want)
	}
	e.do(t, func(*cuda.Ctx) error {
		v, err := e.h.Version()
		if err == nil && v != 130002 {
			t.Errorf("Handle.Version() = %d, want 130002", v)
		}
		return err
	})
	testGemmEx(t, e)

	lt, h := newMockLt(t, e.dev, "MOCK_CUBLASLT_VERSION=130002")
	if got, want := lt.Version(), (Version{13, 0, 2}); got != want {
		t.Errorf("cuBLASLt Version() = %v, want %v", got, want)
	}
	r := rand.New(rand.NewPCG(13, 0))
	c := gemmCase{Trans, NoTrans, 6, 5, 4, 1, 1, 0}
	ar, ac := storedDims(c.ta, c.m, c.k)
	br, bc := storedDims(c.tb, c.k, c.n)
	a := newMat(r, ar, ac, leading(false, ar, ac, c.pad), false, true)
	b := newMat(r, br, bc, leading(false, br, bc, c.pad), false, true)
	cm := newMat(r, c.m, c.n, leading(false, c.m, c.n, c.pad), false, true)
	bm := newMat(r, c.m, 1, c.m, false, true)
	pBias, _, _ := uploadAs(t, e.dev, bm.v, R16BF)
	ref, tol := refGemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a, b, c.beta, cm, bm.v)
	da, db, dc := uploadMat(t, e.dev, a, R16BF), uploadMat(t, e.dev, b, R16BF), uploadMat(t, e.dev, cm, R16BF)
	p := LtMatmul{TransA: c.ta, TransB: c.tb, M: c.m, N: c.n, K: c.k, Alpha: float32(c.alpha), Beta: float32(c.beta),
		A: da.matrix(), B: db.matrix(), C: dc.matrix(), Bias: Vector{pBias, R16BF}, Compute: Compute32F}
	if err := e.dev.Do(func(*cuda.Ctx) error { return h.Matmul(p) }); err != nil {
		t.Fatal(err)
	}
	dc.check(t, e.dev, ref, tol, c.m)
}
