package ncclcomm

import (
	"context"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

// The conformance suite covers every collective, dtype and op; these are
// the lifecycle questions of an NCCL communicator.

// Comms of one name made one after another on the same Store pair up by
// their order on each rank, and each works.
func testSuccessiveCommsOfOneName(t *testing.T, w *world) {
	ctx := context.Background()
	sts := commtest.Stores(t, 2, comm.RendezvousOptions{})
	for round := range 3 {
		cs := make([]*Comm, 2)
		t.Cleanup(func() {
			for _, c := range cs {
				if c != nil {
					c.Close()
				}
			}
		})
		commtest.MustOnEveryRank(t, 2, func(r int) error {
			var err error
			cs[r], err = New(ctx, w.options(sts[r], r))
			return err
		})
		bufs := make([]backend.Buffer, 2)
		mems := make([]*deviceMemory, 2)
		for r := range 2 {
			mems[r] = &deviceMemory{tb: t, dev: w.devs[r]}
			b, err := mems[r].Alloc(backend.Device, backend.Comm, backend.F32, 5)
			if err != nil {
				t.Fatal(err)
			}
			defer mems[r].Free(b)
			if err := backend.WriteF32(mems[r], b, []float32{float32(r + round), 1, 2, 3, 4}); err != nil {
				t.Fatal(err)
			}
			bufs[r] = b
		}
		commtest.MustOnEveryRank(t, 2, func(r int) error { return cs[r].AllReduce(ctx, bufs[r], comm.Sum) })
		for r := range 2 {
			got, err := backend.ReadF32(mems[r], bufs[r])
			if err != nil {
				t.Fatal(err)
			}
			if want := float32(1 + 2*round); got[0] != want || got[4] != 8 {
				t.Fatalf("round %d rank %d: all-reduce gave %v, want %v first and 8 last", round, r, got, want)
			}
		}
		for r, c := range cs {
			if err := c.Close(); err != nil {
				t.Fatalf("round %d: close rank %d: %v", round, r, err)
			}
		}
	}
}

// Close returns the Comm's device memory and makes later calls fail; it
// is idempotent.
func testCloseReleasesDeviceMemory(t *testing.T, w *world) {
	free := func(r int) uint64 {
		f, _, err := w.devs[r].MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	before := []uint64{free(0), free(1)}
	ranks := w.ranks(t, 2, nil)
	if free(0) >= before[0] {
		t.Fatalf("New allocated no device memory (free %d, before %d)", free(0), before[0])
	}
	for r, rk := range ranks {
		if err := rk.Comm.Close(); err != nil {
			t.Fatalf("close rank %d: %v", r, err)
		}
		if err := rk.Comm.Close(); err != nil {
			t.Errorf("second close of rank %d: %v", r, err)
		}
		if got := free(r); got != before[r] {
			t.Errorf("rank %d: %d bytes free after Close, %d before New", r, got, before[r])
		}
	}
	if err := ranks[0].Comm.Barrier(context.Background()); err == nil {
		t.Errorf("Barrier after Close succeeded")
	}
}
