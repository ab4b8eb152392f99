package comm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	testSecret  = []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	otherSecret = []byte("fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210")
)

// secretWorld joins size ranks that share testSecret and job id "job-A"
// and returns their stores and the store's port.
func secretWorld(t *testing.T, size int) ([]Store, int) {
	t.Helper()
	var port int
	ranks := make([]int, size)
	for i := range ranks {
		ranks[i] = i
	}
	stores, errs := rendezvousAll(t, size, ranks, func(o *RendezvousOptions) {
		o.Secret, o.JobID, port = testSecret, "job-A", o.Port
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return stores, port
}

// v1Request is a request as the store read it before it had a handshake:
// length, op, id, fields.
func v1Request(op uint8, fields func(*encoder)) []byte {
	e := newEncoder()
	e.u8(op)
	e.u64(1)
	fields(e)
	return e.finish()
}

// TestStoreRefusesClientWithoutSecret: a client that does not know the job
// secret cannot write a key (the attack of pointing rank 1 at a foreign
// listener by overwriting rank 0's published address), read one, or join;
// one with the wrong secret is refused within one round trip, and says so.
func TestStoreRefusesClientWithoutSecret(t *testing.T) {
	st, port := secretWorld(t, 2)
	ctx := context.Background()
	const addrKey = "gotrain/tcp/world/addr/0"
	if err := st[0].Set(ctx, addrKey, []byte("127.0.0.1:4242")); err != nil {
		t.Fatal(err)
	}

	// The intruder speaks the store's request format without a handshake:
	// overwrite the address, read it, join as rank 1.
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var attack []byte
	attack = append(attack, v1Request(opSet, func(e *encoder) { e.str(addrKey); e.bytes([]byte("10.6.6.6:1")) })...)
	attack = append(attack, v1Request(opSet, func(e *encoder) { e.str("intruder"); e.bytes([]byte("was here")) })...)
	attack = append(attack, v1Request(opGet, func(e *encoder) { e.str(addrKey); e.dur(time.Second) })...)
	attack = append(attack, v1Request(opJoin, func(e *encoder) { e.i64(1); e.i64(2); e.i64(0); e.dur(time.Second) })...)
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(attack); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(conn) // until the store hangs up
	if bytes.Contains(got, []byte("127.0.0.1:4242")) {
		t.Fatalf("the store served a key to a client without the secret: %q", got)
	}
	if v, err := st[1].Get(ctx, addrKey); err != nil || string(v) != "127.0.0.1:4242" {
		t.Fatalf("rank 0's address after the attack: %q, %v", v, err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if v, err := st[1].Get(short, "intruder"); err == nil {
		t.Fatalf("a client without the secret wrote a key: %q", v)
	}

	// A rank with the wrong secret: refused at once, and told why.
	start := time.Now()
	_, err = dialStore(ctx, "127.0.0.1", port, 1, 2, 10*time.Second,
		clientAuth{secret: otherSecret, jobID: "job-A", hint: "the secret came from the test"})
	if err == nil || !strings.Contains(err.Error(), "refused this rank: its job secret differs from rank 0's; the secret came from the test") {
		t.Fatalf("wrong secret: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the refusal took %v", took)
	}
}

// TestStoreClientRejectsForeignListener: a listener on MASTER_PORT that
// greets like a store and accepts any proof, but does not know the secret,
// is not taken for rank 0.
func TestStoreClientRejectsForeignListener(t *testing.T) {
	ln, port := loopbackListener(t)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				nonce, _ := NewNonce()
				c.Write(append(append([]byte(storeMagic), nonce...), byte(len("job-A"))))
				c.Write([]byte("job-A"))
				io.ReadFull(c, make([]byte, NonceSize+MACSize))
				forged := Proof(otherSecret, "server", nonce) // the best it can do
				c.Write(append([]byte{authAccepted}, forged...))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	_, err := Rendezvous(context.Background(), RendezvousOptions{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port,
		Timeout: 5 * time.Second, Secret: testSecret, JobID: "job-A"})
	if err == nil || !strings.Contains(err.Error(), "accepted this rank without proving it knows the job secret") {
		t.Fatalf("joined a foreign listener: %v", err)
	}
}

// TestStoreWaitCountBoundedByMessageLength: the 29-byte wait request that
// claims 64 Mi keys is refused without allocating for them (it made rank 0
// allocate about 1 GiB).
func TestStoreWaitCountBoundedByMessageLength(t *testing.T) {
	attack := v1Request(opWait, func(e *encoder) { e.i64(64 << 20); e.dur(time.Second) })
	if len(attack) != 29 {
		t.Fatalf("attack is %d bytes", len(attack))
	}
	s := newStoreServer(neverListener{}, 2, serverConfig{})
	defer s.close()
	gone := make(chan struct{})
	var err error
	alloc := allocatedBy(func() { _, err = s.handleBlocking(opWait, &decoder{b: attack[4+1+8:]}, gone) })
	if err == nil {
		t.Fatal("a wait for 64 Mi keys in 8 bytes was accepted")
	}
	if alloc > 64<<10 {
		t.Fatalf("refusing the request allocated %d bytes", alloc)
	}

	// The same over the wire, from a client that holds the secret.
	_, port := secretWorld(t, 1)
	conn := authedConn(t, port, testSecret, "job-A")
	defer conn.Close()
	var reply []byte
	alloc = allocatedBy(func() {
		conn.Write(attack)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		reply, err = readMessage(conn)
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := (&decoder{b: reply}); d.u64() != 1 || d.u8() != statusErr || !strings.Contains(string(d.b), "claims 67108864 elements but holds 8 bytes") {
		t.Fatalf("reply %q", reply)
	}
	if alloc > 1<<20 {
		t.Fatalf("serving the request allocated %d bytes", alloc)
	}
}

// TestStoreShedsIdleUnauthenticatedConnections: a flood of idle
// connections (which used to pile up until rank 0 ran out of file
// descriptors) is held to the cap and closed after the handshake timeout,
// while real ranks keep joining.
func TestStoreShedsIdleUnauthenticatedConnections(t *testing.T) {
	ln, port := loopbackListener(t)
	const maxPending, flood = 8, 40
	authTimeout := 400 * time.Millisecond
	srv := newStoreServer(ln, 2, serverConfig{key: storeKey(testSecret, "job-A"), jobID: "job-A", authTimeout: authTimeout, maxPending: maxPending})
	defer srv.close()

	idle := make([]net.Conn, flood)
	for i := range idle {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle[i] = c
	}
	start := time.Now()
	var wg sync.WaitGroup
	clients := make([]*storeClient, 2)
	errs := make([]error, 2)
	for r := range 2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := dialStore(ctx, "127.0.0.1", port, r, 2, 10*time.Second, clientAuth{secret: testSecret, jobID: "job-A"})
			if err == nil {
				clients[r] = c
				err = c.join(ctx, nil, 10*time.Second)
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d during the flood: %v", r, err)
		}
		defer clients[r].Close()
	}
	if took := time.Since(start); took > authTimeout {
		t.Errorf("the ranks needed %v to join during the flood (longer than the handshake timeout)", took)
	}
	if n := srv.pending.Len(); n > maxPending {
		t.Fatalf("%d unauthenticated connections held, cap %d", n, maxPending)
	}
	// Every idle connection is closed by the server: the evicted at once,
	// the rest when their handshake time is up.
	for i, c := range idle {
		c.SetReadDeadline(start.Add(authTimeout + 2*time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("idle connection %d still open %v after the flood: %v", i, time.Since(start).Round(time.Millisecond), err)
		}
	}
	if n := srv.pending.Len(); n != 0 {
		t.Fatalf("%d unauthenticated connections still held", n)
	}
	// The ranks' connections were not touched.
	if err := clients[1].Set(context.Background(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// TestStoreKeepsAcceptingAfterTemporaryError: an Accept error such as
// EMFILE used to end the store's accept loop for good.
func TestStoreKeepsAcceptingAfterTemporaryError(t *testing.T) {
	stores, errs := rendezvousAll(t, 2, []int{0, 1}, func(o *RendezvousOptions) {
		o.Timeout = 5 * time.Second
		if o.Listener != nil {
			o.Listener = &flakyListener{Listener: o.Listener, failures: 3}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if err := stores[1].Set(context.Background(), "after", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// TestRendezvousRefusesAnotherJob: a rank of another job that reaches this
// job's store (two jobs started on one port) is refused with both job ids
// and never joins, and this job's own rendezvous goes ahead.
func TestRendezvousRefusesAnotherJob(t *testing.T) {
	ln, port := loopbackListener(t)
	o := func(rank int, secret []byte, job string) RendezvousOptions {
		return RendezvousOptions{Rank: rank, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 5 * time.Second, Secret: secret, JobID: job}
	}
	rank0 := make(chan error, 1)
	var st0 Store
	go func() {
		ro := o(0, testSecret, "job-A")
		ro.Listener = ln
		var err error
		st0, err = Rendezvous(context.Background(), ro)
		rank0 <- err
	}()
	start := time.Now()
	_, err := Rendezvous(context.Background(), o(1, otherSecret, "job-B"))
	if err == nil || !strings.Contains(err.Error(), `serves job "job-A" but this rank belongs to job "job-B": another job is using MASTER_PORT`) {
		t.Fatalf("rank 1 of job B: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the refusal took %v", took)
	}
	st1, err := Rendezvous(context.Background(), o(1, testSecret, "job-A"))
	if err != nil {
		t.Fatalf("rank 1 of job A: %v", err)
	}
	if err := <-rank0; err != nil {
		t.Fatalf("rank 0 of job A: %v", err)
	}
	st1.Close()
	st0.Close()
}

// warnings collects a Warnf's lines with the time each arrived.
type warnings struct {
	mu    sync.Mutex
	lines []string
	at    []time.Time
}

func (w *warnings) warnf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, fmt.Sprintf(format, args...))
	w.at = append(w.at, time.Now())
}

func (w *warnings) first(substr string) (string, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, l := range w.lines {
		if strings.Contains(l, substr) {
			return l, w.at[i], true
		}
	}
	return "", time.Time{}, false
}

// TestRendezvousReportsRefusedRankAtOnce: a rank refused for another
// secret or another job id must not leave rank 0 silent until the
// rendezvous times out (--comm-timeout, 30 minutes by default): rank 0
// says at once which rank it refused, from where and why, and the
// rendezvous fails on rank 0 well within its timeout with the same.
func TestRendezvousReportsRefusedRankAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name, job string
		secret    []byte
		why       string
	}{
		{"secret", "job-A", otherSecret, "proof of the job secret was wrong"},
		{"job id", "job-B", testSecret, `belongs to job "job-B", not this job "job-A"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, port := loopbackListener(t)
			const timeout = 2 * time.Second
			var warn warnings
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := Rendezvous(context.Background(), RendezvousOptions{Rank: 0, Size: 3, Addr: "127.0.0.1", Port: port,
					Timeout: timeout, Secret: testSecret, JobID: "job-A", Listener: ln, Warnf: warn.warnf})
				done <- err
			}()
			_, err := Rendezvous(context.Background(), RendezvousOptions{Rank: 2, Size: 3, Addr: "127.0.0.1", Port: port,
				Timeout: timeout, Secret: tc.secret, JobID: tc.job})
			if err == nil {
				t.Fatal("the misconfigured rank 2 joined")
			}
			refusedAt := time.Now()
			// The store logs as it refuses; allow for a loaded machine.
			deadline := time.Now().Add(2 * time.Second)
			var line string
			var at time.Time
			for ok := false; !ok && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				line, at, ok = warn.first("refused rank 2")
			}
			if line == "" {
				t.Fatalf("rank 0 said nothing of refusing rank 2 (warnings %q)", warn.lines)
			}
			if !strings.Contains(line, "from 127.0.0.1:") || !strings.Contains(line, tc.why) {
				t.Errorf("rank 0's warning %q does not name the address and %q", line, tc.why)
			}
			if d := at.Sub(refusedAt); d > time.Second {
				t.Errorf("rank 0 reported the refusal %v after it", d)
			}
			err = <-done
			if took := time.Since(start); took >= timeout {
				t.Errorf("rank 0 failed after %v, the whole rendezvous timeout", took)
			}
			if err == nil || !strings.Contains(err.Error(), "rank 2 cannot join: the store refused it (connecting from 127.0.0.1:") ||
				!strings.Contains(err.Error(), tc.why) {
				t.Errorf("rank 0: %v, want the refusal of rank 2 with %q", err, tc.why)
			}
		})
	}
}

// TestRendezvousNeedsSecretOffLoopback: a store other hosts can reach is
// never served without a secret.
func TestRendezvousNeedsSecretOffLoopback(t *testing.T) {
	_, err := Rendezvous(context.Background(), RendezvousOptions{Rank: 0, Size: 2, Addr: "192.0.2.7", Port: 29500})
	if err == nil || !strings.Contains(err.Error(), "no job secret for a store at MASTER_ADDR=192.0.2.7") {
		t.Fatal(err)
	}
}

// TestStoreBindsMasterAddrInterfaceOnly: the store listens on the
// interface MASTER_ADDR names (it used to listen on every interface
// whenever MASTER_ADDR was not loopback), and says so when it cannot tell.
func TestStoreBindsMasterAddrInterfaceOnly(t *testing.T) {
	local := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.1.2.3"), net.ParseIP("fd00::5")}
	for _, tc := range []struct {
		addr     string
		resolved []string
		want     string
		warn     bool
	}{
		{"127.0.0.1", nil, "127.0.0.1", false},
		{"localhost", nil, "localhost", false},
		{"10.1.2.3", nil, "10.1.2.3", false},
		{"node-a", []string{"fd00::5", "10.1.2.3"}, "fd00::5", false},
		{"node-a", []string{"127.0.1.1"}, "", true},       // the name maps to a loopback alias here
		{"lb.example", []string{"203.0.113.9"}, "", true}, // NAT or a load balancer
		{"203.0.113.9", nil, "", true},
	} {
		var resolved []net.IP
		for _, r := range tc.resolved {
			resolved = append(resolved, net.ParseIP(r))
		}
		host, warning := bindHost(tc.addr, resolved, local)
		if host != tc.want || (warning != "") != tc.warn {
			t.Errorf("bindHost(%s, %v) = %q, %q; want %q, warning %v", tc.addr, tc.resolved, host, warning, tc.want, tc.warn)
		}
		if tc.warn && !strings.Contains(warning, "serves the store on every interface") {
			t.Errorf("warning %q", warning)
		}
	}

	// On this machine: a non-loopback address is bound itself.
	var ip net.IP
	for _, l := range localIPs() {
		if l.To4() != nil && !l.IsLoopback() && !l.IsLinkLocalUnicast() {
			ip = l
			break
		}
	}
	if ip == nil {
		t.Skip("this host has no non-loopback IPv4 address to bind")
	}
	var warned []string
	ln, err := listenStore(context.Background(), ip.String(), 0, func(f string, a ...any) { warned = append(warned, f) })
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got := ln.Addr().(*net.TCPAddr).IP; !got.Equal(ip) || len(warned) != 0 {
		t.Fatalf("MASTER_ADDR=%s: the store listens on %s (warnings %v)", ip, got, warned)
	}
}

// authedConn dials the store at port and completes the handshake.
func authedConn(t *testing.T, port int, secret []byte, job string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := clientHandshake(c, storeKey(secret, job), 1, job, "test", ""); err != nil {
		c.Close()
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	return c
}

// allocatedBy is how many bytes of heap f allocated (plus a little noise
// from other goroutines).
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// neverListener accepts nothing until closed.
type neverListener struct{}

func (neverListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (neverListener) Close() error              { return nil }
func (neverListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// flakyListener fails its first Accepts as a process out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	mu       sync.Mutex
	failures int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.failures > 0
	l.failures--
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return l.Listener.Accept()
}

// TestRendezvousInterruptedIsNotATimeout: a rank stopped (Ctrl-C) while
// waiting for rank 0 said it "could not reach rank 0's store within"
// however long it had waited, as if it had timed out.
func TestRendezvousInterruptedIsNotATimeout(t *testing.T) {
	ln, port := loopbackListener(t)
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err := Rendezvous(ctx, RendezvousOptions{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "rank 1 stopped waiting for rank 0's store at 127.0.0.1:") ||
		!errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted rendezvous: %v", err)
	}
}

func TestPendingConnsEvictsOldestAndClosesLateArrivals(t *testing.T) {
	p := NewPendingConns(2)
	var ends []net.Conn
	for range 3 {
		a, b := net.Pipe()
		defer b.Close()
		ends = append(ends, b)
		if !p.Admit(a) {
			t.Fatal("admission refused before CloseAll")
		}
	}
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	if !closed(ends[0]) || closed(ends[1]) || p.Len() != 2 {
		t.Fatalf("after 3 admissions with cap 2: oldest closed %v, second closed %v, %d held", closed(ends[0]), closed(ends[1]), p.Len())
	}
	p.CloseAll()
	a, b := net.Pipe()
	defer b.Close()
	if p.Admit(a) || !closed(b) || !closed(ends[2]) || p.Len() != 0 {
		t.Fatal("a connection admitted after CloseAll was kept open")
	}
}

// TestRendezvousInterruptedNamesWhatAndWhy: SIGTERM during the rendezvous
// ended it with a bare "context canceled". The error says what the rank
// was waiting for and what stopped it (the context's cause: the signal).
func TestRendezvousInterruptedNamesWhatAndWhy(t *testing.T) {
	sig := errors.New("terminated signal received") // what os/signal.NotifyContext gives as the cause
	t.Run("rank 0 waiting for the join", func(t *testing.T) {
		ln, port := loopbackListener(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(200*time.Millisecond, func() { cancel(sig) })
		_, err := Rendezvous(ctx, RendezvousOptions{Rank: 0, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second, Listener: ln})
		if err == nil || !strings.Contains(err.Error(), "rank 0 stopped waiting for all 2 ranks to join at 127.0.0.1:") ||
			!strings.Contains(err.Error(), "terminated signal received") || !errors.Is(err, sig) {
			t.Fatalf("interrupted join: %v", err)
		}
	})
	t.Run("rank 1 dialing", func(t *testing.T) {
		ln, port := loopbackListener(t)
		ln.Close()
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(200*time.Millisecond, func() { cancel(sig) })
		_, err := Rendezvous(ctx, RendezvousOptions{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "rank 1 stopped waiting for rank 0's store at 127.0.0.1:") ||
			!strings.Contains(err.Error(), "terminated signal received") {
			t.Fatalf("interrupted dial: %v", err)
		}
	})
}
