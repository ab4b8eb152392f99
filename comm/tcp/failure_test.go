package tcp

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

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

func wantAborted(t *testing.T, who string, err error, rank int, reason string) {
	t.Helper()
	var ab *comm.AbortedError
	if !errors.As(err, &ab) {
		t.Fatalf("%s: got %v, want an AbortedError from rank %d", who, err, rank)
	}
	if ab.Rank != rank || !strings.Contains(err.Error(), reason) {
		t.Fatalf("%s: %v, want rank %d and %q", who, err, rank, reason)
	}
}

func bigBuffer(t *testing.T, e *rankEnv, n int) backend.Buffer {
	t.Helper()
	b, err := e.be.Alloc(backend.Device, backend.Grads, backend.F32, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTimeoutNamesTheRankWaitedFor(t *testing.T) {
	envs := newWorld(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	buf := bigBuffer(t, envs[0], 1000)
	err := envs[0].c.AllReduce(ctx, buf, comm.Sum) // rank 1 never joins in
	var te *comm.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a TimeoutError", err)
	}
	if te.Op != comm.KindAllReduce || len(te.Peers) != 1 || te.Peers[0] != 1 || te.Elapsed < 300*time.Millisecond {
		t.Fatalf("timeout error %+v", te)
	}
	if !strings.Contains(err.Error(), "comm: all-reduce timed out after") || !strings.Contains(err.Error(), "waiting for rank 1") {
		t.Fatalf("message %q", err)
	}
	// The Comm is now unusable here, and rank 1 learns why on its next call.
	if err := envs[0].c.Barrier(context.Background()); err == nil {
		t.Fatal("a call after a timeout succeeded")
	}
	err = envs[1].c.AllReduce(context.Background(), bigBuffer(t, envs[1], 1000), comm.Sum)
	wantAborted(t, "rank 1", err, 0, "timed out")
}

func TestDefaultTimeoutNamesEveryMissingRank(t *testing.T) {
	envs := newWorld(t, 3, func(o *Options) { o.Timeout = 300 * time.Millisecond })
	err := envs[0].c.Barrier(context.Background())
	var te *comm.TimeoutError
	if !errors.As(err, &te) || te.Op != comm.KindBarrier || te.Timeout != 300*time.Millisecond {
		t.Fatalf("got %v, want a barrier TimeoutError with the 300ms default", err)
	}
	if !strings.Contains(err.Error(), "waiting for ranks [1 2]") {
		t.Fatalf("message %q", err)
	}
}

func TestPeerLostWhileOthersWait(t *testing.T) {
	// Ranks 0, 1 and 3 are in an all-reduce that needs rank 2, which dies
	// (its sockets close without any farewell, as on kill -9).
	envs := newWorld(t, 4, nil)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for _, r := range []int{0, 1, 3} {
		buf := bigBuffer(t, envs[r], 1000003)
		wg.Go(func() { errs[r] = envs[r].c.AllReduce(context.Background(), buf, comm.Sum) })
	}
	time.Sleep(100 * time.Millisecond)
	envs[2].c.kill()
	wg.Wait()
	for _, r := range []int{0, 1, 3} {
		wantPeerLost(t, "rank "+string(rune('0'+r)), errs[r], 2, comm.KindAllReduce)
	}
	// Every later call fails the same way, naming its own op.
	wantPeerLost(t, "later barrier", envs[0].c.Barrier(context.Background()), 2, comm.KindBarrier)
}

func TestPeerLostMidTraffic(t *testing.T) {
	envs := newWorld(t, 3, nil)
	errs := make([]error, 3)
	started := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for r := range 3 {
		buf := bigBuffer(t, envs[r], 300007)
		wg.Go(func() {
			for i := 0; ; i++ {
				if i == 2 {
					once.Do(func() { close(started) })
				}
				if err := envs[r].c.AllReduce(context.Background(), buf, comm.Sum); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	<-started
	time.Sleep(5 * time.Millisecond)
	envs[1].c.kill()
	wg.Wait()
	wantPeerLost(t, "rank 0", errs[0], 1, comm.KindAllReduce)
	wantPeerLost(t, "rank 2", errs[2], 1, comm.KindAllReduce)
}

func TestAbortReachesEveryRank(t *testing.T) {
	envs := newWorld(t, 3, nil)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for _, r := range []int{0, 2} {
		buf := bigBuffer(t, envs[r], 1000)
		wg.Go(func() { errs[r] = envs[r].c.AllReduce(context.Background(), buf, comm.Sum) })
	}
	time.Sleep(100 * time.Millisecond)
	envs[1].c.Abort(errors.New("loss is NaN at step 12"))
	wg.Wait()
	for _, r := range []int{0, 2} {
		wantAborted(t, "rank "+string(rune('0'+r)), errs[r], 1, "loss is NaN at step 12")
		if !strings.Contains(errs[r].Error(), "all-reduce aborted by rank 1") {
			t.Fatalf("message %q", errs[r])
		}
	}
	wantAborted(t, "rank 1 itself", envs[1].c.Barrier(context.Background()), 1, "loss is NaN")
}

func TestDisagreementIsReportedNotHung(t *testing.T) {
	envs := newWorld(t, 2, nil)
	errs := onEveryRank(envs, func(r int, e *rankEnv) error {
		return e.c.AllReduce(context.Background(), bigBuffer(t, e, 10+r), comm.Sum)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "ranks disagree on the collective") ||
			!strings.Contains(err.Error(), "all-reduce(sum) of 11 fp32") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestIdlePeerKeptAliveByHeartbeats(t *testing.T) {
	envs := newWorld(t, 2, func(o *Options) {
		o.Heartbeat = 20 * time.Millisecond
		o.PeerTimeout = 200 * time.Millisecond
	})
	errs := onEveryRank(envs, func(r int, e *rankEnv) error {
		if r == 1 {
			time.Sleep(800 * time.Millisecond) // busy computing, four silence limits long
		}
		return e.c.Barrier(context.Background())
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestSilentPeerIsDeclaredLost(t *testing.T) {
	// Rank 1 is played by the test: it connects and says hello, then sends
	// nothing, as a hung host would, while keeping the socket open.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	stores := make([]comm.Store, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		ro := comm.RendezvousOptions{Rank: r, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second}
		if r == 0 {
			ro.Listener = ln
		}
		wg.Go(func() {
			var err error
			if stores[r], err = comm.Rendezvous(context.Background(), ro); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	defer stores[0].Close()
	defer stores[1].Close()

	var fake net.Conn
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
}

func TestPeerThatClosedIsReported(t *testing.T) {
	envs := newWorld(t, 2, nil)
	envs[1].c.Close()
	err := envs[0].c.Barrier(context.Background())
	wantPeerLost(t, "rank 0", err, 1, comm.KindBarrier)
	if !strings.Contains(err.Error(), "closed its communicator") {
		t.Fatalf("message %q", err)
	}
	if err := envs[1].c.Barrier(context.Background()); err == nil || !strings.Contains(err.Error(), "closed communicator") {
		t.Fatalf("call after Close: %v", err)
	}
}
