package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// loopbackListener binds 127.0.0.1 on a free port for rank 0's store.
func loopbackListener(t *testing.T) (net.Listener, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, ln.Addr().(*net.TCPAddr).Port
}

// rendezvousAll runs Rendezvous for the given ranks of a world of size
// concurrently and returns each rank's store and error (indexed by rank).
func rendezvousAll(t *testing.T, size int, ranks []int, mod func(*RendezvousOptions)) ([]Store, []error) {
	t.Helper()
	ln, port := loopbackListener(t)
	stores := make([]Store, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for _, r := range ranks {
		o := RendezvousOptions{Rank: r, Size: size, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second}
		if r == 0 {
			o.Listener = ln
		}
		if mod != nil {
			mod(&o)
		}
		wg.Go(func() { stores[r], errs[r] = Rendezvous(context.Background(), o) })
	}
	wg.Wait()
	if !contains(ranks, 0) {
		ln.Close()
	}
	t.Cleanup(func() {
		for r := len(stores) - 1; r >= 0; r-- { // rank 0 serves the others: close it last
			if stores[r] != nil {
				stores[r].Close()
			}
		}
	})
	return stores, errs
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func world(t *testing.T, size int) []Store {
	t.Helper()
	ranks := make([]int, size)
	for i := range ranks {
		ranks[i] = i
	}
	stores, errs := rendezvousAll(t, size, ranks, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return stores
}

func TestStoreSetGetAddWaitBarrier(t *testing.T) {
	const size = 3
	st := world(t, size)
	ctx := context.Background()
	for r, s := range st {
		if s.Rank() != r || s.Size() != size {
			t.Fatalf("store %d says rank %d of %d", r, s.Rank(), s.Size())
		}
		if s.AdvertiseHost() != "127.0.0.1" {
			t.Fatalf("rank %d AdvertiseHost = %q, want 127.0.0.1 (the interface that reaches MASTER_ADDR)", r, s.AdvertiseHost())
		}
	}

	// A Get issued before the Set blocks until it arrives.
	got := make(chan []byte, 1)
	go func() {
		v, err := st[2].Get(ctx, "late")
		if err != nil {
			t.Error(err)
		}
		got <- v
	}()
	time.Sleep(50 * time.Millisecond)
	if err := st[1].Set(ctx, "late", []byte("value from rank 1")); err != nil {
		t.Fatal(err)
	}
	if v := <-got; string(v) != "value from rank 1" {
		t.Fatalf("Get = %q", v)
	}
	// Overwrite and empty values.
	if err := st[0].Set(ctx, "late", nil); err != nil {
		t.Fatal(err)
	}
	if v, err := st[2].Get(ctx, "late"); err != nil || len(v) != 0 {
		t.Fatalf("Get after overwrite = %q, %v", v, err)
	}

	// Concurrent Adds from every rank: the counter ends at the exact total.
	var wg sync.WaitGroup
	for r, s := range st {
		wg.Go(func() {
			for range 20 {
				if _, err := s.Add(ctx, "counter", int64(r+1)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if v, err := st[0].Add(ctx, "counter", 0); err != nil || v != 20*(1+2+3) {
		t.Fatalf("counter = %d, %v; want %d", v, err, 20*(1+2+3))
	}
	if v, err := st[1].Get(ctx, "counter"); err != nil || string(v) != "120" {
		t.Fatalf("Get counter = %q, %v", v, err)
	}

	// Wait returns once all keys exist.
	waited := make(chan error, 1)
	go func() { waited <- st[0].Wait(ctx, "a", "b") }()
	st[1].Set(ctx, "a", []byte("1"))
	st[2].Set(ctx, "b", []byte("2"))
	if err := <-waited; err != nil {
		t.Fatal(err)
	}

	// A barrier name can be reused round after round, and no rank leaves a
	// round before every rank entered it.
	var mu sync.Mutex
	entered := 0
	for round := range 3 {
		for _, s := range st {
			wg.Go(func() {
				mu.Lock()
				entered++
				mu.Unlock()
				if err := s.Barrier(ctx, "step"); err != nil {
					t.Error(err)
				}
				mu.Lock()
				if entered < size*(round+1) {
					t.Errorf("round %d: a rank left the barrier after %d entries", round, entered)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
	}
}

func TestStoreGetTimeout(t *testing.T) {
	st := world(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := st[1].Get(ctx, "never")
	if err == nil || !strings.Contains(err.Error(), `key "never" was not set within 200ms`) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel2()
	st[0].Set(context.Background(), "here", []byte("x"))
	err = st[0].Wait(ctx2, "here", "missing")
	if err == nil || !strings.Contains(err.Error(), `keys ["missing"] were not set within 150ms`) {
		t.Fatalf("Wait for a missing key: %v", err)
	}
}

func TestStoreBarrierNamesMissingRanks(t *testing.T) {
	st := world(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() { errs[r] = st[r].Barrier(ctx, "epoch") })
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), `barrier "epoch": ranks [2 3] of 4 did not arrive within 200ms`) {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestRendezvousNamesMissingRanks(t *testing.T) {
	_, errs := rendezvousAll(t, 4, []int{0, 1}, func(o *RendezvousOptions) { o.Timeout = 300 * time.Millisecond })
	want := "rendezvous: ranks [2 3] of 4 did not arrive within 300ms; check that every rank was started with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE"
	for r := range 2 {
		if errs[r] == nil || errs[r].Error() != want {
			t.Fatalf("rank %d: %v\nwant: %s", r, errs[r], want)
		}
	}
}

func TestRendezvousRejectsMismatchedWorldSize(t *testing.T) {
	_, errs := rendezvousAll(t, 3, []int{0, 1, 2}, func(o *RendezvousOptions) {
		if o.Rank == 2 {
			o.Size = 4
		}
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2 was started with WORLD_SIZE=4 but rank 0 with WORLD_SIZE=3") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestRendezvousNamesDisagreeingFields(t *testing.T) {
	// Rank 2 arrives before rank 0 would matter: whoever comes first, the
	// error compares with rank 0 and is the same on every rank.
	_, errs := rendezvousAll(t, 3, []int{0, 1, 2}, func(o *RendezvousOptions) {
		o.Fields = []Field{{"version", "dev"}, {"config.optimizer.params.lr", "0.001"}, {"seq_len", "64"}, {"data", "1 file"}}
		if o.Rank == 2 {
			o.Fields[1].Value = "0.002"
			o.Fields[2].Value = "128"
			o.Fields = append(o.Fields, Field{"init_from", "gpt2.bin"})
		}
	})
	want := "rendezvous: rank 2 disagrees with rank 0 on 3 settings: config.optimizer.params.lr: 0.001 (rank 0) ≠ 0.002 (rank 2); seq_len: 64 ≠ 128; init_from: (absent) ≠ gpt2.bin. Every rank must run the same config, command line, data and gotrain version"
	for r, err := range errs {
		if err == nil || err.Error() != want {
			t.Fatalf("rank %d: %v\nwant: %s", r, err, want)
		}
	}
}

func TestFieldsDisagreementListsAtMostTen(t *testing.T) {
	var ref, got []Field
	for i := range 14 {
		ref = append(ref, Field{fmt.Sprintf("k%02d", i), "a"})
		got = append(got, Field{fmt.Sprintf("k%02d", i), "b"})
	}
	got[13].Value = strings.Repeat("é", 200)
	msg := fieldsDisagreement(ref, got, 3)
	if !strings.HasPrefix(msg, "rendezvous: rank 3 disagrees with rank 0 on 14 settings: k00: a (rank 0) ≠ b (rank 3); k01: a ≠ b;") ||
		!strings.Contains(msg, "k09: a ≠ b; and 4 more.") || strings.Contains(msg, "k10") {
		t.Fatal(msg)
	}
	if m := fieldsDisagreement(ref, ref, 1); m != "" {
		t.Fatalf("equal fields: %q", m)
	}
	if s := shown(got[13].Value); !strings.HasSuffix(s, "…") || len(s) > maxShownValue+len("…") || !utf8.ValidString(s) {
		t.Fatalf("cut value %q", s)
	}
}

func TestRendezvousUnreachableMaster(t *testing.T) {
	ln, port := loopbackListener(t)
	ln.Close() // nobody serves this port
	_, err := Rendezvous(context.Background(), RendezvousOptions{Rank: 1, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "rank 1 could not reach rank 0's store at 127.0.0.1:") ||
		!strings.Contains(err.Error(), "check MASTER_ADDR/MASTER_PORT") {
		t.Fatalf("unreachable master: %v", err)
	}
}

func TestRendezvousRetriesWhileRankZeroStarts(t *testing.T) {
	ln, port := loopbackListener(t)
	ln.Close() // rank 0 binds the port itself, later than rank 1 starts dialing
	var wg sync.WaitGroup
	stores := make([]Store, 2)
	errs := make([]error, 2)
	for r := range 2 {
		wg.Go(func() {
			if r == 0 {
				time.Sleep(300 * time.Millisecond)
			}
			stores[r], errs[r] = Rendezvous(context.Background(), RendezvousOptions{Rank: r, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	stores[1].Close()
	stores[0].Close()
}

func TestRendezvousValidatesOptions(t *testing.T) {
	for _, tc := range []struct {
		o    RendezvousOptions
		want string
	}{
		{RendezvousOptions{Rank: 0, Size: 0, Addr: "127.0.0.1", Port: 1}, "WORLD_SIZE is 0"},
		{RendezvousOptions{Rank: 2, Size: 2, Addr: "127.0.0.1", Port: 1}, "RANK 2 is outside [0, 2)"},
		{RendezvousOptions{Rank: 0, Size: 1, Port: 1}, "MASTER_ADDR is empty"},
		{RendezvousOptions{Rank: 0, Size: 1, Addr: "127.0.0.1", Port: 70000}, "MASTER_PORT 70000"},
	} {
		_, err := Rendezvous(context.Background(), tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}

func TestStoreReportsLostServer(t *testing.T) {
	ln, port := loopbackListener(t)
	stores := make([]Store, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		o := RendezvousOptions{Rank: r, Size: 2, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second}
		if r == 0 {
			o.Listener = ln
		}
		wg.Go(func() {
			var err error
			if stores[r], err = Rendezvous(context.Background(), o); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	defer stores[1].Close()
	got := make(chan error, 1)
	go func() {
		_, err := stores[1].Get(context.Background(), "never")
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	stores[0].Close()
	err := <-got
	if err == nil || !strings.Contains(err.Error(), "rank 0 probably exited") {
		t.Fatalf("Get while rank 0 exits: %v", err)
	}
	if err := stores[1].Set(context.Background(), "k", nil); err == nil {
		t.Fatal("Set after losing the store succeeded")
	}
}

func TestSingleRankRendezvous(t *testing.T) {
	st := world(t, 1)
	if err := st[0].Barrier(context.Background(), "alone"); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutErrorText(t *testing.T) {
	err := error(&TimeoutError{Op: KindAllReduce, Peers: []int{1, 3}, Elapsed: 5*time.Second + 3*time.Millisecond, Timeout: 5 * time.Second})
	if !strings.Contains(err.Error(), "all-reduce timed out after 5.003s (timeout 5s) waiting for ranks [1 3]") {
		t.Fatal(err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("TimeoutError does not match context.DeadlineExceeded")
	}
	lost := error(&PeerLostError{Rank: 2, Op: KindReduceScatter, ReportedBy: 1, Err: errors.New("connection reset")})
	if lost.Error() != "comm: lost rank 2 during reduce-scatter (reported by rank 1): connection reset (the process probably died; see its log)" {
		t.Fatal(lost)
	}
}

func TestBusFactor(t *testing.T) {
	// nccl-tests' definitions: all-reduce moves 2(n−1)/n of the message per
	// rank, all-gather and reduce-scatter (n−1)/n.
	for _, tc := range []struct {
		k    Kind
		n    int
		want float64
	}{
		{KindAllReduce, 2, 1}, {KindAllReduce, 4, 1.5}, {KindAllGather, 4, 0.75},
		{KindReduceScatter, 2, 0.5}, {KindBroadcast, 8, 1}, {KindAllReduce, 1, 0},
	} {
		if got := BusFactor(tc.k, tc.n); got != tc.want {
			t.Errorf("BusFactor(%s, %d) = %v, want %v", tc.k, tc.n, got, tc.want)
		}
	}
}

func TestAdvertiseHost(t *testing.T) {
	for _, tc := range []struct {
		local, master, want string
	}{
		{"10.0.0.5", "node-a", "10.0.0.5"},      // a worker: the interface that reaches the master
		{"127.0.1.1", "node-a", "node-a"},       // the master's host, whose name maps to a loopback alias
		{"127.0.0.1", "127.0.0.1", "127.0.0.1"}, // a single-host job stays on loopback
		{"::1", "localhost", "::1"},
	} {
		if got := advertiseHost(net.ParseIP(tc.local), tc.master); got != tc.want {
			t.Errorf("advertiseHost(%s, %s) = %s, want %s", tc.local, tc.master, got, tc.want)
		}
	}
}
