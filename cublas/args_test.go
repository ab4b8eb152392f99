package cublas

import (
	"errors"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
)

// testGemmArgumentChecks: arguments cuBLAS would refuse are refused before
// the call, with the argument named.
func testGemmArgumentChecks(t *testing.T, e *mockEnv) {
	p := upload(t, e.dev, make([]float32, 64))
	f := func(ld int) Matrix { return Matrix{Ptr: p, Type: R32F, LD: ld} }
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"transA", func() error { return e.h.GemmEx(2, NoTrans, 2, 2, 2, 1, f(2), f(2), 0, f(2), Compute32F) }, "transA"},
		{"negative m", func() error { return e.h.GemmEx(NoTrans, NoTrans, -1, 2, 2, 1, f(2), f(2), 0, f(2), Compute32F) }, "m=-1"},
		{"huge k", func() error { return e.h.GemmEx(NoTrans, NoTrans, 2, 2, 1<<31, 1, f(2), f(1<<31), 0, f(2), Compute32F) }, "k="},
		{"lda N", func() error { return e.h.GemmEx(NoTrans, NoTrans, 3, 2, 2, 1, f(2), f(2), 0, f(3), Compute32F) }, "lda=2"},
		{"lda T", func() error { return e.h.GemmEx(Trans, NoTrans, 2, 2, 3, 1, f(2), f(3), 0, f(2), Compute32F) }, "lda=2"},
		{"ldb T", func() error { return e.h.GemmEx(NoTrans, Trans, 2, 4, 2, 1, f(2), f(3), 0, f(2), Compute32F) }, "ldb=3"},
		{"ldc", func() error { return e.h.GemmEx(NoTrans, NoTrans, 4, 2, 2, 1, f(4), f(2), 0, f(3), Compute32F) }, "ldc=3"},
		{"types", func() error {
			return e.h.GemmEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), Matrix{p, R16BF, 2}, 0, f(2), Compute32F)
		}, "types"},
		{"bf16 out of f32", func() error {
			return e.h.GemmEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), f(2), 0, Matrix{p, R16BF, 2}, Compute32F)
		}, "types"},
		{"compute", func() error { return e.h.GemmEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), f(2), 0, f(2), 70) }, "compute type"},
		{"null C", func() error {
			return e.h.GemmEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), f(2), 0, Matrix{0, R32F, 2}, Compute32F)
		}, "null"},
		{"batch", func() error {
			return e.h.GemmStridedBatchedEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), 4, f(2), 4, 0, f(2), 4, -1, Compute32F)
		}, "batch count -1"},
		{"stride", func() error {
			return e.h.GemmStridedBatchedEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), -4, f(2), 4, 0, f(2), 4, 2, Compute32F)
		}, "negative"},
		{"overlapping C", func() error {
			return e.h.GemmStridedBatchedEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), 4, f(2), 4, 0, f(2), 3, 2, Compute32F)
		}, "overlap"},
		{"side by side past ldc", func() error {
			// Three 2-row outputs side by side need ldc ≥ 6.
			return e.h.GemmStridedBatchedEx(NoTrans, NoTrans, 2, 2, 2, 1, f(2), 4, f(2), 4, 0, f(5), 2, 3, Compute32F)
		}, "overlap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			e.do(t, func(*cuda.Ctx) error { err = c.call(); return nil })
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrInvalidArgument mentioning %q", err, c.want)
			}
		})
	}
}

// testGemmEmptyProducts: m, n or k of 0 are legal; k = 0 leaves beta·C.
func testGemmEmptyProducts(t *testing.T, e *mockEnv) {
	c := upload(t, e.dev, []float32{1, 2, 3, 4})
	e.do(t, func(*cuda.Ctx) error {
		// Null A and B: with m = 0 or k = 0 nothing is read from them.
		if err := e.h.GemmEx(NoTrans, NoTrans, 0, 2, 2, 1, Matrix{0, R32F, 1}, Matrix{0, R32F, 2}, 0, Matrix{c, R32F, 1}, Compute32F); err != nil {
			return err
		}
		return e.h.GemmEx(NoTrans, NoTrans, 2, 2, 0, 1, Matrix{0, R32F, 2}, Matrix{0, R32F, 1}, 0.5, Matrix{c, R32F, 2}, Compute32F)
	})
	got := download[float32](t, e.dev, c, 4)
	for i, want := range []float32{0.5, 1, 1.5, 2} {
		if got[i] != want {
			t.Errorf("C[%d] = %g, want %g (beta·C with k = 0)", i, got[i], want)
		}
	}
}
