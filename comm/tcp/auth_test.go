package tcp

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

// secretStores joins two ranks to a store with a job secret.
func secretStores(t *testing.T) []comm.Store {
	t.Helper()
	return commtest.Stores(t, 2, comm.RendezvousOptions{Timeout: 10 * time.Second,
		Secret: []byte("peer-mesh-test-secret-0123456789abcdef"), JobID: "job-A"})
}

// startRankZero starts rank 0 of a two-rank world with a job secret in the
// background and returns the address it takes peers on, as published for
// rank 1, and join, which starts rank 1 and returns both Comms once both
// are up (closed when the test ends).
func startRankZero(t *testing.T, timeout time.Duration) (addr string, join func() []*Comm) {
	t.Helper()
	stores := secretStores(t)
	comms := make([]*Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	newRank := func(r int) {
		wg.Go(func() {
			comms[r], errs[r] = New(context.Background(), stores[r], newWorldBackend(), Options{Rank: r, Size: 2, Timeout: timeout})
		})
	}
	newRank(0)
	t.Cleanup(wg.Wait) // rank 0 gives up by its timeout if rank 1 never comes
	published, err := stores[1].Get(context.Background(), "gotrain/tcp/world/addr/0")
	if err != nil {
		t.Fatal(err)
	}
	return string(published), func() []*Comm {
		t.Helper()
		newRank(1)
		wg.Wait()
		t.Cleanup(func() { closeAll(comms...) })
		if err := commtest.FirstErr(errs); err != nil {
			t.Fatal(err)
		}
		return comms
	}
}

// TestPeerHelloRejectsListenerWithoutSecret: rank 1 dials the address
// published for rank 0 and finds a listener that answers every hello as
// rank 0 of "world" but does not know the job secret. Rank 1 used to accept
// it as rank 0 (the hello checked only version, size and name).
func TestPeerHelloRejectsListenerWithoutSecret(t *testing.T) {
	stores := secretStores(t)
	foreign, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer foreign.Close()
	go func() {
		for {
			conn, err := foreign.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				na, _ := comm.NewNonce()
				writeFrame(conn, frameChallenge, append([]byte{wireVersion, 0, 0, 0}, na...))
				_, p, err := readFrame(conn)
				if err != nil {
					return
				}
				h, _ := parseHello(p)
				guess := comm.Proof([]byte("not the secret"), "acceptor", transcript(h.rank, 0, 2, "world", na, h.nonce)...)
				writeFrame(conn, frameHello, hello{version: wireVersion, rank: 0, size: 2, name: "world", proof: guess}.payload())
				conn.Read(make([]byte, 1))
			}()
		}
	}()
	// What an attacker with write access to the store would do; the store
	// itself now refuses writes without the secret (comm's tests).
	if err := stores[0].Set(context.Background(), "gotrain/tcp/world/addr/0", []byte(foreign.Addr().String())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := New(ctx, stores[1], newWorldBackend(), Options{Rank: 1, Size: 2, Timeout: 5 * time.Second})
	if err == nil {
		c.Close()
		t.Fatal("rank 1 accepted a listener without the job secret as rank 0")
	}
	if !strings.Contains(err.Error(), "did not prove the job secret: it is not this job's rank 0") {
		t.Fatalf("error %q", err)
	}
}

// TestPeerHelloRefusesDialerWithoutSecret: a process that dials rank 0's
// peer listener first and claims to be rank 1, without the job secret, is
// refused within one round trip and told why; the real rank 1 then joins.
// Rank 0 used to take the impostor as rank 1 and refuse the real one.
func TestPeerHelloRefusesDialerWithoutSecret(t *testing.T) {
	addr, join := startRankZero(t, 10*time.Second)
	fake, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	fake.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	_, err = dialHello(fake, []byte("not the secret"), hello{version: wireVersion, rank: 1, size: 2, name: "world"}, 0)
	if err == nil || !strings.Contains(err.Error(), "rank 0 refused this rank's hello: the hello does not prove the job secret") {
		t.Fatalf("impostor: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the refusal took %v", took)
	}

	comms := join()
	commtest.MustOnEveryRank(t, 2, func(r int) error { return comms[r].Barrier(context.Background()) })
}

// TestPeerListenerNotBlockedByIdleConnections: connections that never say
// hello used to be greeted one at a time, each holding the listener for up
// to ten seconds, so a few dozen of them kept the real peers out past the
// timeout.
func TestPeerListenerNotBlockedByIdleConnections(t *testing.T) {
	addr, join := startRankZero(t, 5*time.Second)
	for range 2 * maxPendingPeers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	start := time.Now()
	comms := join()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("rank 1 needed %v to connect past the idle connections", took)
	}
	buf := allocWith(t, comms[0].be, backend.F32, []float32{1, 2})
	buf1 := allocWith(t, comms[1].be, backend.F32, []float32{3, 4})
	commtest.MustOnEveryRank(t, 2, func(r int) error {
		return comms[r].AllReduce(context.Background(), []backend.Buffer{buf, buf1}[r], comm.Sum)
	})
	if got := readAll(t, comms[1].be, buf1); got[0] != 4 || got[1] != 6 {
		t.Fatalf("all-reduce = %v", got)
	}
}
