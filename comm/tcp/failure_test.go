package tcp

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

// The conformance suite covers timeouts, aborts, killed peers and
// disagreements; these are the failures only a TCP mesh has: silence,
// heartbeats and a peer that closed its end.

func wantPeerLost(t *testing.T, who string, err error, rank int, op comm.Kind) {
	t.Helper()
	var pl *comm.PeerLostError
	if !errors.As(err, &pl) {
		t.Fatalf("%s: got %v, want a PeerLostError naming rank %d", who, err, rank)
	}
	if pl.Rank != rank || pl.Op != op {
		t.Fatalf("%s: %v names rank %d during %s, want rank %d during %s", who, err, pl.Rank, pl.Op, rank, op)
	}
	if !strings.Contains(err.Error(), "lost rank") || !strings.Contains(err.Error(), "see its log") {
		t.Fatalf("%s: message %q does not explain the loss", who, err)
	}
}

func TestIdlePeerKeptAliveByHeartbeats(t *testing.T) {
	ranks := newWorld(t, 2, func(o *Options) {
		o.Heartbeat = 20 * time.Millisecond
		o.PeerTimeout = 200 * time.Millisecond
	})
	commtest.MustOnEveryRank(t, 2, func(r int) error {
		if r == 1 {
			time.Sleep(800 * time.Millisecond) // busy computing, four silence limits long
		}
		return ranks[r].Comm.Barrier(context.Background())
	})
}

func TestSilentPeerIsDeclaredLost(t *testing.T) {
	// Rank 1 is played by the test: it connects and says hello, then sends
	// nothing, as a hung host would, while keeping the socket open.
	stores := commtest.Stores(t, 2, comm.RendezvousOptions{Timeout: 10 * time.Second})
	var fake net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		addr, err := stores[1].Get(context.Background(), "gotrain/tcp/world/addr/0")
		if err != nil {
			t.Error(err)
			return
		}
		if fake, err = net.Dial("tcp", string(addr)); err != nil {
			t.Error(err)
			return
		}
		fake.SetDeadline(time.Now().Add(10 * time.Second))
		key := stores[1].PeerKey("tcp/world")
		if _, err := dialHello(fake, key, hello{version: wireVersion, rank: 1, size: 2, name: "world"}, 0); err != nil {
			t.Error(err)
		}
		fake.SetDeadline(time.Time{})
	})
	be := newWorldBackend()
	c, err := New(context.Background(), stores[0], be, Options{Rank: 0, Size: 2, Timeout: 20 * time.Second,
		Heartbeat: 50 * time.Millisecond, PeerTimeout: 300 * time.Millisecond})
	wg.Wait()
	if err != nil || t.Failed() {
		t.Fatalf("setup: %v", err)
	}
	defer fake.Close()
	defer c.Close()
	err = c.Barrier(context.Background())
	wantPeerLost(t, "rank 0", err, 1, comm.KindBarrier)
	if !strings.Contains(err.Error(), "no data or heartbeat for 300ms") {
		t.Fatalf("message %q", err)
	}
	// A silent peer may be alive but stopped (SIGSTOP): the message must
	// not say it died.
	if !strings.Contains(err.Error(), "not responding: stopped (SIGSTOP, a debugger), hung or dead") || strings.Contains(err.Error(), "probably died") {
		t.Fatalf("message %q: want it to say the peer is not responding (stopped or dead), not that it died", err)
	}
}

func TestPeerThatClosedIsReported(t *testing.T) {
	ranks := newWorld(t, 2, nil)
	ranks[1].Comm.Close()
	err := ranks[0].Comm.Barrier(context.Background())
	wantPeerLost(t, "rank 0", err, 1, comm.KindBarrier)
	if !strings.Contains(err.Error(), "closed its communicator") {
		t.Fatalf("message %q", err)
	}
	if err := ranks[1].Comm.Barrier(context.Background()); err == nil || !strings.Contains(err.Error(), "closed communicator") {
		t.Fatalf("call after Close: %v", err)
	}
}
