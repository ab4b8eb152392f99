package meta_test

import (
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/backend/meta"
	"github.com/gotrain/gotrain/blas"
)

// TestAccountingMatchesCPU: the same allocations and frees on the
// accounting backend and on the CPU backend give the same current bytes by
// pool and category and the same pool peaks.
func TestAccountingMatchesCPU(t *testing.T) {
	cb := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	mb := meta.New(meta.Options{})
	type alloc struct {
		pool backend.Pool
		cat  backend.Category
		dt   backend.DType
		n    int
	}
	seq := []alloc{
		{backend.Device, backend.Params, backend.BF16, 1001},
		{backend.Device, backend.Grads, backend.F32, 1001},
		{backend.HostPinned, backend.Master, backend.F32, 333},
		{backend.Host, backend.Optimizer, backend.F32, 666},
		{backend.Device, backend.Activations, backend.F16, 7},
		{backend.Device, backend.Comm, backend.I32, 2},
		{backend.Device, backend.Workspace, backend.U16, 0},
	}
	var cbufs, mbufs []backend.Buffer
	for _, a := range seq {
		c, err := cb.Alloc(a.pool, a.cat, a.dt, a.n)
		if err != nil {
			t.Fatal(err)
		}
		m, err := mb.Alloc(a.pool, a.cat, a.dt, a.n)
		if err != nil {
			t.Fatal(err)
		}
		cbufs, mbufs = append(cbufs, c), append(mbufs, m)
	}
	for _, i := range []int{1, 4} {
		cb.Free(cbufs[i])
		mb.Free(mbufs[i])
	}
	if c, m := cb.Memory(), mb.Memory(); c != m {
		t.Errorf("CPU accounting %+v, meta %+v", c, m)
	}
	at := mb.AtPeak(backend.Device)
	if got, want := at[backend.Grads], int64(4*1001); got != want {
		t.Errorf("device grads at the peak: %d bytes, want %d (held when the peak was reached)", got, want)
	}
	mb.ResetPeak()
	if mb.Memory().Peak[backend.Device] != mb.Memory().PoolTotal(backend.Device) {
		t.Error("ResetPeak did not restart the peak at the current total")
	}
}

// TestShapeChecks: a wrong length is a bug in the caller and panics with
// the op and the argument named, as on the real backends; use of a freed
// buffer too.
func TestShapeChecks(t *testing.T) {
	be := meta.New(meta.Options{})
	buf := func(n int) backend.Buffer {
		b, err := be.Alloc(backend.Device, backend.Activations, backend.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name, want string
		f          func()
	}{
		{"matmul out", "MatmulForward: out has 5 elements, want 6", func() { be.MatmulForward(buf(5), buf(4), buf(6), backend.Buffer{}, 2, 2, 3) }},
		{"matmul bias", "bias has 2 elements, want 3", func() { be.MatmulForward(buf(6), buf(4), buf(6), buf(2), 2, 2, 3) }},
		{"missing weight", "weight is the zero Buffer", func() { be.LayerNormForward(buf(4), buf(2), buf(2), buf(4), backend.Buffer{}, buf(2), 2, 2) }},
		{"swiglu", "SwiGLUForward: inp has 3 elements, want 4", func() { be.SwiGLUForward(buf(2), buf(3), 1, 2) }},
		{"freed", "use of a freed buffer", func() { b := buf(3); be.Free(b); be.Zero(b) }},
	} {
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tc.want) {
					t.Errorf("%s: panic %v, want one containing %q", tc.name, r, tc.want)
				}
			}()
			tc.f()
		}()
	}
}

// TestTraceAndDownload: calls are recorded with their dimensions and
// buffers (optional absent ones left out), and Download returns zeros.
func TestTraceAndDownload(t *testing.T) {
	be := meta.New(meta.Options{Trace: true})
	a, _ := be.Alloc(backend.Device, backend.Activations, backend.BF16, 6)
	x, _ := be.Alloc(backend.Device, backend.Activations, backend.BF16, 4)
	w, _ := be.Alloc(backend.Device, backend.Params, backend.F32, 6)
	be.MatmulForward(a, x, w, backend.Buffer{}, 2, 2, 3)
	tr := be.Trace()
	if len(tr) != 1 || tr[0].Op != "MatmulForward" || len(tr[0].Args) != 3 {
		t.Fatalf("trace %+v", tr)
	}
	if n, ok := tr[0].Dim("OC"); !ok || n != 3 {
		t.Errorf("OC = %d, %v", n, ok)
	}
	if out := tr[0].Args[0]; out.Name != "out" || !out.Write || out.Bytes() != 12 {
		t.Errorf("out argument %+v", out)
	}
	got := []byte{1, 2, 3, 4, 5, 6, 7, 8}
	if err := be.Download(got, x); err != nil {
		t.Fatal(err)
	}
	for _, v := range got {
		if v != 0 {
			t.Fatalf("download %v, want zeros", got)
		}
	}
	be.ResetTrace()
	if len(be.Trace()) != 0 {
		t.Error("ResetTrace kept calls")
	}
}
