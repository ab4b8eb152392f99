package commtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// fakeComm is a rank's Comm that only knows its place and whether it was
// closed: all the harness handles.
type fakeComm struct {
	comm.Comm
	rank, size int
	closed     atomic.Int32
}

func (f *fakeComm) Rank() int    { return f.rank }
func (f *fakeComm) Size() int    { return f.size }
func (f *fakeComm) Close() error { f.closed.Add(1); return nil }

// NewWorld builds every rank at once on its own store client, and closes
// every Comm once when the test ends.
func TestNewWorld(t *testing.T) {
	const size = 3
	comms := make([]*fakeComm, size)
	t.Run("world", func(t *testing.T) {
		ranks := NewWorld(t, size, func(ctx context.Context, st comm.Store, r, n int) (comm.Comm, backend.Backend, error) {
			if st.Rank() != r || st.Size() != n || n != size {
				return nil, nil, fmt.Errorf("rank %d of %d built on the store of rank %d of %d", r, n, st.Rank(), st.Size())
			}
			// Only ranks built concurrently get past a store barrier.
			if err := st.Barrier(ctx, "built"); err != nil {
				return nil, nil, err
			}
			comms[r] = &fakeComm{rank: r, size: n}
			return comms[r], nil, nil
		})
		for r, rk := range ranks {
			if rk.Comm != comms[r] || rk.Store.Rank() != r {
				t.Fatalf("rank %d holds the Comm or the store of another rank", r)
			}
		}
		MustOnEveryRank(t, size, func(r int) error {
			return ranks[r].Store.Set(context.Background(), fmt.Sprintf("rank%d", r), []byte{byte(r)})
		})
		v, err := ranks[0].Store.Get(context.Background(), "rank2")
		if err != nil || len(v) != 1 || v[0] != 2 {
			t.Fatalf("rank 0 reads rank 2's key as %v, %v", v, err)
		}
	})
	for r, c := range comms {
		if n := c.closed.Load(); n != 1 {
			t.Errorf("rank %d's Comm closed %d times when its test ended, want once", r, n)
		}
	}
}

// Stores passes what the ranks agree on through to the rendezvous.
func TestStoresCarryTheJob(t *testing.T) {
	sts := Stores(t, 2, comm.RendezvousOptions{JobID: "job-7", Secret: []byte("a secret of the job, 32 bytes...")})
	for r, st := range sts {
		if st.JobID() != "job-7" || st.Rank() != r || st.Size() != 2 {
			t.Errorf("rank %d's store: job %q, rank %d of %d", r, st.JobID(), st.Rank(), st.Size())
		}
	}
}

// FirstErr names the lowest rank that failed and keeps its error.
func TestFirstErr(t *testing.T) {
	cause := errors.New("no route")
	err := FirstErr([]error{nil, cause, errors.New("later")})
	if !errors.Is(err, cause) || err.Error() != "rank 1: no route" {
		t.Errorf("FirstErr = %v", err)
	}
	if err := FirstErr(make([]error, 3)); err != nil {
		t.Errorf("FirstErr of no errors = %v", err)
	}
}
