package cublas

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
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

// cuBLAS and cuBLASLt refuse a handle with CUBLAS_STATUS_NOT_INITIALIZED
// both without a usable GPU and on a driver older than their CUDA major;
// the error keeps the status and names the driver branch each needs.
func TestCreateNotInitializedNamesDriverFloor(t *testing.T) {
	dev := mockDevice(t)
	check := func(t *testing.T, err error, wants ...string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Status != StatusNotInitialized {
			t.Fatalf("NewHandle = %v, want CUBLAS_STATUS_NOT_INITIALIZED", err)
		}
		for _, want := range wants {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
	}
	for _, c := range []struct {
		major, floor string
	}{{"12", "R525"}, {"13", "R580"}} {
		t.Run(c.major, func(t *testing.T) {
			t.Setenv(EnvLibrary, cudatest.BuildMockCUBLAS(t, "MOCK_CUBLAS_MAJOR="+c.major, "MOCK_CREATE_NOT_INITIALIZED"))
			lib, err := Load(LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = dev.Do(func(*cuda.Ctx) error { _, err := lib.NewHandle(); return err })
			check(t, err, "cublasCreate_v2", c.floor, "cuBLAS "+c.major+".3.4 needs a driver for CUDA "+c.major)

			t.Setenv(EnvLtLibrary, cudatest.BuildMockCUBLASLt(t, "MOCK_CUBLASLT_VERSION="+c.major+"0002", "MOCK_CREATE_NOT_INITIALIZED"))
			lt, err := LoadLt(LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			err = dev.Do(func(*cuda.Ctx) error { _, err := lt.NewHandle(); return err })
			check(t, err, "cublasLtCreate", c.floor)
		})
	}
}
