package cublas

import (
	"errors"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
)

func testVersion(t *testing.T, e *mockEnv) {
	// The mock is 12.3.4: distinct numbers, so a swapped property id shows.
	if got, want := e.lib.Version(), (Version{12, 3, 4}); got != want {
		t.Errorf("Version() = %v, want %v", got, want)
	}
	if got := e.lib.Version().String(); got != "12.3.4" {
		t.Errorf("Version().String() = %q", got)
	}
	e.do(t, func(*cuda.Ctx) error {
		v, err := e.h.Version()
		if err != nil {
			return err
		}
		if v != 12*10000+3*100+4 {
			t.Errorf("Handle.Version() = %d, want 120304", v)
		}
		return nil
	})
	if !strings.HasSuffix(e.lib.Path(), "libcublas.so.12") {
		t.Errorf("Path() = %q, want the mock's file", e.lib.Path())
	}
}

func testStreamAndMathMode(t *testing.T, e *mockEnv) {
	s, err := e.dev.NewStream(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.dev.DestroyStream(s) })
	e.do(t, func(*cuda.Ctx) error {
		if got, err := e.h.Stream(); err != nil || got != 0 {
			t.Errorf("new handle's stream = %v, %v; want the default stream", got, err)
		}
		if err := e.h.SetStream(s); err != nil {
			return err
		}
		if got, err := e.h.Stream(); err != nil || got != s {
			t.Errorf("Stream() = %#x, %v; want %#x", uintptr(got), err, uintptr(s))
		}
		want := TF32TensorOpMath | MathDisallowReducedPrecisionReduction
		if err := e.h.SetMathMode(want); err != nil {
			return err
		}
		if got, err := e.h.MathMode(); err != nil || got != want {
			t.Errorf("MathMode() = %d, %v; want %d", got, err, want)
		}
		err := e.h.SetMathMode(5)
		if !IsStatus(err, StatusInvalidValue) {
			t.Fatalf("SetMathMode(5) = %v, want CUBLAS_STATUS_INVALID_VALUE", err)
		}
		// The error carries the call and the library's own text for the status.
		for _, part := range []string{"cublasSetMathMode(5)", "CUBLAS_STATUS_INVALID_VALUE (7)", "mock: an argument is out of range"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("error %q lacks %q", err, part)
			}
		}
		// Leave the shared handle as it was, before the stream goes away.
		return errors.Join(e.h.SetStream(0), e.h.SetMathMode(DefaultMath))
	})
}

// TestStatusWithoutStatusString runs against a cuBLAS that predates
// cublasGetStatusString: errors still name the status.
func TestStatusWithoutStatusString(t *testing.T) {
	e := newMockEnv(t, "MOCK_NO_STATUS_STRING")
	e.do(t, func(*cuda.Ctx) error {
		err := e.h.SetMathMode(7)
		var ce *Error
		if !errors.As(err, &ce) || ce.Status != StatusInvalidValue || ce.Msg != "" {
			t.Errorf("SetMathMode(7) = %#v, want CUBLAS_STATUS_INVALID_VALUE without library text", err)
		}
		return nil
	})
}

func testWorkspace(t *testing.T, e *mockEnv) {
	const size, guard = 4096, 512
	ws, err := e.dev.Alloc(size + guard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.dev.Free(ws) })
	if err := e.dev.MemsetD8(ws, 0x11, size+guard); err != nil {
		t.Fatal(err)
	}
	a := upload(t, e.dev, []float32{1, 2, 3, 4})
	c := upload(t, e.dev, make([]float32, 4))
	e.do(t, func(*cuda.Ctx) error {
		if err := e.h.SetWorkspace(ws.Add(1), size); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "256") {
			t.Errorf("misaligned workspace: %v", err)
		}
		if err := e.h.SetWorkspace(ws, -1); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("negative workspace size: %v", err)
		}
		if err := e.h.SetWorkspace(ws, size); err != nil {
			return err
		}
		return e.h.GemmEx(NoTrans, NoTrans, 2, 2, 2, 1, Matrix{a, R32F, 2}, Matrix{a, R32F, 2}, 0, Matrix{c, R32F, 2}, Compute32F)
	})
	// The mock uses all of the workspace it is given as scratch, and only that.
	got := download[byte](t, e.dev, ws, size+guard)
	for i, b := range got {
		want := byte(0xA5)
		if i >= size {
			want = 0x11
		}
		if b != want {
			t.Fatalf("workspace byte %d = %#x, want %#x (size %d passed, guard after it)", i, b, want, size)
		}
	}
	e.do(t, func(*cuda.Ctx) error { return e.h.SetWorkspace(0, 0) })
}

func testClosedHandle(t *testing.T, e *mockEnv) {
	e.do(t, func(*cuda.Ctx) error {
		h, err := e.lib.NewHandle()
		if err != nil {
			return err
		}
		if err := h.Close(); err != nil {
			return err
		}
		m := Matrix{Ptr: 256, Type: R32F, LD: 1}
		for name, err := range map[string]error{
			"Close":        h.Close(),
			"SetStream":    h.SetStream(0),
			"SetMathMode":  h.SetMathMode(DefaultMath),
			"SetWorkspace": h.SetWorkspace(0, 0),
			"GemmEx":       h.GemmEx(NoTrans, NoTrans, 1, 1, 1, 1, m, m, 0, m, Compute32F),
			"GemmStridedBatchedEx": h.GemmStridedBatchedEx(NoTrans, NoTrans, 1, 1, 1, 1, m, 0, m, 0, 0, m, 1, 1,
				Compute32F),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", name, err)
			}
		}
		return nil
	})
}
