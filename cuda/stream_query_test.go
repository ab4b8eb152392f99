package cuda_test

import (
	"testing"

	"github.com/gotrain/gotrain/cuda"
)

// StreamQuery reports a stream whose work has run as done (the mock runs
// stream work at once), also for the default stream, and turns a failed
// query (a stream of another device's context) into an *Error naming the
// call.
func TestStreamQuery(t *testing.T) {
	drv := loadMock(t, 2)
	d0, d1 := openDevice(t, drv, 0), openDevice(t, drv, 1)
	s, err := d0.NewStream(true)
	if err != nil {
		t.Fatal(err)
	}
	defer d0.DestroyStream(s)
	p, err := d0.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	defer d0.Free(p)
	if err := d0.MemsetD8Async(p, 7, 64, s); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]cuda.Stream{"own stream": s, "default stream": 0} {
		if done, err := d0.StreamQuery(st); !done || err != nil {
			t.Errorf("%s: StreamQuery = %v, %v; want done", name, done, err)
		}
	}
	other, err := d1.NewStream(true)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.DestroyStream(other)
	done, err := d0.StreamQuery(other)
	if done || !cuda.IsResult(err, cuda.ErrorInvalidHandle) {
		t.Errorf("another context's stream: StreamQuery = %v, %v; want CUDA_ERROR_INVALID_HANDLE", done, err)
	}
}
