package commtest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// setupTimeout bounds the rendezvous and each rank's construction: generous,
// because two loaded CI cores may take seconds to start a few goroutine
// ranks, yet finite, so a broken constructor fails the test instead of
// hanging it.
const setupTimeout = 20 * time.Second

// Rank is one in-process rank of a world: its Comm, the Backend its Buffers
// live on, and its rendezvous Store (nil in a world without one, such as
// comm.Solo's).
type Rank struct {
	Comm    comm.Comm
	Backend backend.Backend
	Store   comm.Store
}

// NewRankFunc builds rank rank of a world of size on store: its Backend and
// its Comm. NewWorld calls it for every rank at once, since constructors
// wait for their peers. On error the Comm is ignored.
type NewRankFunc func(ctx context.Context, store comm.Store, rank, size int) (comm.Comm, backend.Backend, error)

// Stores joins size ranks to a rendezvous store that rank 0 serves on a
// port of 127.0.0.1 bound beforehand (no race for a free port), and returns
// rank r's Store at index r. o says what the ranks agree on (Secret, JobID,
// Fields; Timeout defaults to 20 s); Rank, Size, Addr, Port and Listener are
// set here. A loopback store needs no secret. The stores close when the
// test ends, rank 0's last, since it serves the others.
func Stores(tb testing.TB, size int, o comm.RendezvousOptions) []comm.Store {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("commtest: listen for the rendezvous store: %v", err)
	}
	if o.Timeout == 0 {
		o.Timeout = setupTimeout
	}
	o.Size, o.Addr, o.Port = size, "127.0.0.1", ln.Addr().(*net.TCPAddr).Port
	stores := make([]comm.Store, size)
	errs := OnEveryRank(size, func(r int) error {
		ro := o
		ro.Rank, ro.Listener = r, nil
		if r == 0 {
			ro.Listener = ln
		}
		var err error
		stores[r], err = comm.Rendezvous(context.Background(), ro)
		return err
	})
	tb.Cleanup(func() {
		for r := size - 1; r >= 0; r-- {
			if stores[r] != nil {
				stores[r].Close()
			}
		}
	})
	if errs[0] != nil {
		ln.Close() // a rank 0 that failed before serving left it open; a second Close is harmless
	}
	if err := FirstErr(errs); err != nil {
		tb.Fatalf("commtest: rendezvous: %v", err)
	}
	return stores
}

// NewWorld starts size ranks in this process: a loopback rendezvous
// (Stores), then newRank for every rank concurrently, as separate processes
// would. When the test ends it closes every Comm concurrently (a Comm's
// Close may wait for its peers' farewells), then the stores; a Close error
// fails the test. Any rank's setup error fails the test.
func NewWorld(tb testing.TB, size int, newRank NewRankFunc) []Rank {
	tb.Helper()
	stores := Stores(tb, size, comm.RendezvousOptions{})
	ranks := make([]Rank, size)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	errs := OnEveryRank(size, func(r int) error {
		c, be, err := newRank(ctx, stores[r], r, size)
		ranks[r] = Rank{Backend: be, Store: stores[r]}
		if err != nil {
			return err
		}
		ranks[r].Comm = c
		return nil
	})
	tb.Cleanup(func() {
		if err := FirstErr(closeComms(ranks)); err != nil {
			tb.Errorf("commtest: close the world: %v", err)
		}
	})
	if err := FirstErr(errs); err != nil {
		tb.Fatalf("commtest: start a world of %d ranks: %v", size, err)
	}
	return ranks
}

// closeComms closes every rank's Comm at once and returns their errors.
func closeComms(ranks []Rank) []error {
	return OnEveryRank(len(ranks), func(r int) error {
		if ranks[r].Comm == nil {
			return nil
		}
		return ranks[r].Comm.Close()
	})
}

// OnEveryRank runs f for ranks 0..size-1 concurrently and returns their
// errors, indexed by rank.
func OnEveryRank(size int, f func(rank int) error) []error {
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	return errs
}

// MustOnEveryRank is OnEveryRank, failing the test with the first rank's
// error.
func MustOnEveryRank(tb testing.TB, size int, f func(rank int) error) {
	tb.Helper()
	if err := FirstErr(OnEveryRank(size, f)); err != nil {
		tb.Fatal(err)
	}
}

// FirstErr is the error of the lowest rank that failed, naming it, or nil.
func FirstErr(errs []error) error {
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
}
