package cublas

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// newMockLt loads the mock cuBLASLt through $GOTRAIN_LIBCUBLASLT and makes
// a handle on the device's thread.
func newMockLt(t *testing.T, dev *cuda.Device, defines ...string) (*LtLibrary, *LtHandle) {
	t.Helper()
	t.Setenv(EnvLtLibrary, cudatest.BuildMockCUBLASLt(t, defines...))
	lib, err := LoadLt(LoadOptions{})
	if err != nil {
		t.Fatalf("load mock cuBLASLt: %v", err)
	}
	var h *LtHandle
	if err := dev.Do(func(*cuda.Ctx) error { h, err = lib.NewHandle(); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Do(func(*cuda.Ctx) error { return h.Close() }) })
	return lib, h
}

func TestLtMatmul(t *testing.T) {
	dev := mockDevice(t)
	lib, h := newMockLt(t, dev)
	// The mock reports CUBLASLT_VERSION 120304: distinct digits, so a wrong
	// decoding shows.
	if got, want := lib.Version(), (Version{12, 3, 4}); got != want {
		t.Errorf("Version() = %v, want %v", got, want)
	}
	r := rand.New(rand.NewPCG(7, 8))
	cases := []gemmCase{
		{NoTrans, NoTrans, 5, 7, 3, 0, 1, 0},
		{Trans, NoTrans, 9, 4, 11, 2, 1.5, 0.5},
		{NoTrans, Trans, 3, 8, 6, 1, -1, 1},
		{Trans, Trans, 6, 5, 1, 3, 0.25, 0},
	}
	for _, tc := range typeCombos() {
		for _, rowMajor := range []bool{false, true} {
			for _, withBias := range []bool{false, true} {
				for _, c := range cases {
					name := fmt.Sprintf("%s/rowmajor=%v/bias=%v/%v", tc.name, rowMajor, withBias, c)
					t.Run(name, func(t *testing.T) {
						bf := tc.in == R16BF
						ar, ac := storedDims(c.ta, c.m, c.k)
						br, bc := storedDims(c.tb, c.k, c.n)
						a := newMat(r, ar, ac, leading(rowMajor, ar, ac, c.pad), rowMajor, bf)
						b := newMat(r, br, bc, leading(rowMajor, br, bc, c.pad), rowMajor, bf)
						cm := newMat(r, c.m, c.n, leading(rowMajor, c.m, c.n, c.pad), rowMajor, tc.out == R16BF)
						// The bias follows the output's rows (column-major) or
						// columns (row-major, a linear layer's features).
						nBias := c.m
						if rowMajor {
							nBias = c.n
						}
						var bias []float64
						var pBias cuda.DevicePtr
						if withBias {
							bm := newMat(r, nBias, 1, nBias, false, tc.out == R16BF)
							bias = bm.v
							pBias, _, _ = uploadAs(t, dev, bias, tc.out)
						}
						var ref, tol []float64
						if rowMajor {
							// Row-major C = op(A)·op(B) + bias[j] on column j: take the
							// reference on C^T = op(B)^T·op(A)^T, with the bias on its rows.
							at, bt, ct := a, b, cm
							at.rowMajor, bt.rowMajor, ct.rowMajor = false, false, false
							at.rows, at.cols = a.cols, a.rows
							bt.rows, bt.cols = b.cols, b.rows
							ct.rows, ct.cols = cm.cols, cm.rows
							refT, tolT := refGemm(c.tb, c.ta, c.n, c.m, c.k, c.alpha, bt, at, c.beta, ct, bias)
							ref, tol = make([]float64, len(refT)), make([]float64, len(tolT))
							for i := 0; i < c.m; i++ {
								for j := 0; j < c.n; j++ {
									ref[i+j*c.m], tol[i+j*c.m] = refT[j+i*c.n], tolT[j+i*c.n]
								}
							}
						} else {
							ref, tol = refGemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a, b, c.beta, cm, bias)
						}
						da, db, dc := uploadMat(t, dev, a, tc.in), uploadMat(t, dev, b, tc.in), uploadMat(t, dev, cm, tc.out)
						p := LtMatmul{TransA: c.ta, TransB: c.tb, M: c.m, N: c.n, K: c.k, Alpha: float32(c.alpha), Beta: float32(c.beta),
							A: da.matrix(), B: db.matrix(), C: dc.matrix(), Bias: Vector{pBias, tc.out}, Compute: Compute32F}
						if err := dev.Do(func(*cuda.Ctx) error {
							if rowMajor {
								return h.MatmulRowMajor(p)
							}
							return h.Matmul(p)
						}); err != nil {
							t.Fatal(err)
						}
						dc.check(t, dev, ref, tol, c.m)
					})
				}
			}
		}
	}
}

// TestLtMatmulErrors: arguments are checked first, and a failing step of
// the library is named with its status.
func TestLtMatmulErrors(t *testing.T) {
	dev := mockDevice(t)
	_, h := newMockLt(t, dev, "MOCK_LT_NO_ALGO")
	p := upload(t, dev, make([]float32, 16))
	m := Matrix{p, R32F, 2}
	base := LtMatmul{TransA: NoTrans, TransB: NoTrans, M: 2, N: 2, K: 2, Alpha: 1, A: m, B: m, C: m, Compute: Compute32F}
	for _, c := range []struct {
		name string
		edit func(*LtMatmul)
		want string
	}{
		{"compute type", func(p *LtMatmul) { p.Compute = 70 }, "compute type"},
		{"ldc", func(p *LtMatmul) { p.C.LD = 1 }, "ldc=1"},
		{"workspace without size", func(p *LtMatmul) { p.Workspace = m.Ptr }, "workspace"},
	} {
		q := base
		c.edit(&q)
		err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(q) })
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", c.name, err, c.want)
		}
	}
	for i := 0; i < 2; i++ { // the second time from the plan cache
		err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(base) })
		if !IsStatus(err, StatusNotSupported) || !errors.Is(err, ErrNoPlan) ||
			!strings.Contains(err.Error(), "cublasLtMatmulAlgoGetHeuristic") {
			t.Errorf("no algorithm: %v, want ErrNoPlan with CUBLAS_STATUS_NOT_SUPPORTED from the heuristic step", err)
		}
	}
	if err := dev.Do(func(*cuda.Ctx) error { return h.Close() }); err != nil {
		t.Fatal(err)
	}
	if err := dev.Do(func(*cuda.Ctx) error { return h.Matmul(base) }); !errors.Is(err, ErrClosed) {
		t.Errorf("Matmul after Close: %v", err)
	}
}
