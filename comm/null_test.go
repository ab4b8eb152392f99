package comm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/meta"
	"github.com/gotrain/gotrain/comm"
)

// TestNullPlaysARank: the null Comm checks lengths as a world of Size
// demands, counts what a real one would carry, and fails after Abort.
func TestNullPlaysARank(t *testing.T) {
	be := meta.New(meta.Options{})
	c := comm.NewNull(2, 4)
	if c.Rank() != 2 || c.Size() != 4 {
		t.Fatalf("rank %d of %d", c.Rank(), c.Size())
	}
	chunk, _ := be.Alloc(backend.Device, backend.Comm, backend.F32, 3)
	full, _ := be.Alloc(backend.Device, backend.Comm, backend.F32, 12)
	ctx := context.Background()
	if err := c.ReduceScatter(ctx, chunk, full, comm.Sum); err != nil {
		t.Fatal(err)
	}
	if err := c.AllGather(ctx, full, chunk); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(ctx, chunk, comm.Avg); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if s.Of(comm.KindReduceScatter).Bytes != 48 || s.Of(comm.KindAllGather).Bytes != 48 || s.Of(comm.KindAllReduce).Calls != 1 {
		t.Errorf("stats %+v", s)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("an all-gather of the wrong length did not panic")
			}
		}()
		c.AllGather(ctx, chunk, chunk)
	}()
	c.Abort(errors.New("stop"))
	var ab *comm.AbortedError
	if err := c.Barrier(ctx); !errors.As(err, &ab) {
		t.Errorf("barrier after abort: %v", err)
	}
}
