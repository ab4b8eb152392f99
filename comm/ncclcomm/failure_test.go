package ncclcomm

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/nccl"
)

// abortedBy returns err as an *AbortedError naming rank, or fails the test.
func abortedBy(t *testing.T, what string, err error, rank int) *comm.AbortedError {
	t.Helper()
	var ab *comm.AbortedError
	if !errors.As(err, &ab) || ab.Rank != rank {
		t.Fatalf("%s: %v; want an abort by rank %d", what, err, rank)
	}
	return ab
}

// f32Buffers allocates an n-element F32 buffer of zeros on each of the
// first size devices.
func f32Buffers(t *testing.T, w *world, size, n int) []backend.Buffer {
	t.Helper()
	bs := make([]backend.Buffer, size)
	for r := range bs {
		b := deviceBuffer(t, w.devs[r], backend.F32, n, 0)
		put(t, w.devs[r], b, make([]float64, n))
		bs[r] = b.Buffer
	}
	return bs
}

// Ranks that disagree on a collective's length or kind all fail with an
// abort instead of hanging, and every later call repeats the cause.
func TestDisagreeingRanksAbort(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for name, calls := range map[string][2]func(c *Comm, b backend.Buffer) error{
		"length": {
			func(c *Comm, b backend.Buffer) error { return c.AllReduce(ctx, b.Slice(0, 8), comm.Sum) },
			func(c *Comm, b backend.Buffer) error { return c.AllReduce(ctx, b.Slice(0, 9), comm.Sum) },
		},
		"kind": {
			func(c *Comm, b backend.Buffer) error { return c.AllReduce(ctx, b, comm.Sum) },
			func(c *Comm, b backend.Buffer) error { return c.Broadcast(ctx, b, 0) },
		},
		"op": {
			func(c *Comm, b backend.Buffer) error { return c.AllReduce(ctx, b, comm.Sum) },
			func(c *Comm, b backend.Buffer) error { return c.AllReduce(ctx, b, comm.Max) },
		},
	} {
		t.Run(name, func(t *testing.T) {
			cs := w.comms(t, stores(t, 2), nil)
			bufs := f32Buffers(t, w, 2, 12)
			errs := each(2, func(r int) error { return calls[r](cs[r], bufs[r]) })
			for r, err := range errs {
				ab := abortedBy(t, "the disagreeing call", err, r)
				if !strings.Contains(err.Error(), "disagree") || !nccl.IsResult(err, nccl.InvalidArgument) {
					t.Errorf("rank %d: %v; want NCCL's invalid argument and a word on disagreeing ranks", r, err)
				}
				later := abortedBy(t, "a later barrier", cs[r].Barrier(ctx), r)
				if later.Reason != ab.Reason || later.Op != comm.KindBarrier {
					t.Errorf("rank %d: later call %v; want the same cause %v", r, later, ab.Reason)
				}
			}
		})
	}
}

// A call that a peer never joins times out at its context's deadline,
// aborts, and the peer's next call reports this rank's timeout.
func TestTimeoutWhenAPeerNeverJoins(t *testing.T) {
	w := newWorld(t)
	cs := w.comms(t, stores(t, 2), nil)
	bufs := f32Buffers(t, w, 2, 4)
	const limit = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	err := cs[0].AllReduce(ctx, bufs[0], comm.Sum)
	var te *comm.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || te.Op != comm.KindAllReduce {
		t.Fatalf("all-reduce no peer joins: %v; want an all-reduce *comm.TimeoutError", err)
	}
	if took := time.Since(start); took < limit || took > limit+5*time.Second || te.Elapsed < limit {
		t.Errorf("timed out after %v (error says %v), limit %v", took, te.Elapsed, limit)
	}
	ab := abortedBy(t, "rank 0 after its timeout", cs[0].Barrier(context.Background()), 0)
	if !errors.As(ab, &te) {
		t.Errorf("rank 0's later call %v does not carry the timeout", ab)
	}
	ab = abortedBy(t, "rank 1 after rank 0 timed out", cs[1].AllReduce(context.Background(), bufs[1], comm.Sum), 0)
	if !strings.Contains(ab.Reason.Error(), "timed out") {
		t.Errorf("rank 1 learns %q; want rank 0's timeout", ab.Reason)
	}
}

// Without a deadline in the context, Options.Timeout bounds the call.
func TestOptionsTimeoutBoundsCallsWithoutDeadline(t *testing.T) {
	w := newWorld(t)
	const limit = 300 * time.Millisecond
	cs := w.comms(t, stores(t, 2), func(o *Options) { o.Timeout = limit })
	err := cs[1].Barrier(context.Background())
	var te *comm.TimeoutError
	if !errors.As(err, &te) || te.Op != comm.KindBarrier || te.Timeout < limit || te.Timeout > limit+50*time.Millisecond {
		t.Fatalf("barrier no peer joins: %v; want a barrier *comm.TimeoutError with a %v limit", err, limit)
	}
}

// Abort on one rank ends the calls its peers are blocked in, with its
// rank and reason, and its own later calls fail with the reason.
func TestAbortReleasesBlockedPeers(t *testing.T) {
	w := newWorld(t)
	const size = 4
	cs := w.comms(t, stores(t, size), nil)
	bufs := f32Buffers(t, w, size, 4)
	reason := errors.New("rank 3 gives up")
	start := time.Now()
	errs := each(size, func(r int) error {
		if r == size-1 {
			time.Sleep(100 * time.Millisecond)
			cs[r].Abort(reason)
			return nil
		}
		return cs[r].AllReduce(context.Background(), bufs[r], comm.Sum)
	})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the blocked peers returned after %v", took)
	}
	for r, err := range errs[:size-1] {
		ab := abortedBy(t, "a peer blocked when rank 3 aborted", err, size-1)
		if ab.Reason.Error() != reason.Error() || ab.Op != comm.KindAllReduce {
			t.Errorf("rank %d: %v; want rank 3's reason in an all-reduce", r, ab)
		}
	}
	ab := abortedBy(t, "rank 3 after its abort", cs[size-1].AllGather(context.Background(), bufs[size-1], bufs[size-1].Slice(0, 1)), size-1)
	if !errors.Is(ab, reason) {
		t.Errorf("rank 3's later call: %v; want its own reason", ab)
	}
}

// Abort from another goroutine ends this rank's own blocked call, and a
// later Abort does not replace the first cause.
func TestAbortEndsOwnBlockedCall(t *testing.T) {
	w := newWorld(t)
	cs := w.comms(t, stores(t, 2), nil)
	bufs := f32Buffers(t, w, 2, 4)
	reason := errors.New("operator pressed stop")
	time.AfterFunc(100*time.Millisecond, func() { cs[0].Abort(reason) })
	err := cs[0].ReduceScatter(context.Background(), bufs[0].Slice(0, 2), bufs[0], comm.Sum)
	if ab := abortedBy(t, "the blocked call", err, 0); !errors.Is(ab, reason) {
		t.Fatalf("the blocked call: %v; want the abort's reason", err)
	}
	cs[0].Abort(errors.New("second thoughts"))
	if err := cs[0].Barrier(context.Background()); !errors.Is(err, reason) {
		t.Errorf("after a second Abort: %v; want the first reason", err)
	}
	ab := abortedBy(t, "the peer", cs[1].ReduceScatter(context.Background(), bufs[1].Slice(0, 2), bufs[1], comm.Sum), 0)
	if ab.Reason.Error() != reason.Error() {
		t.Errorf("the peer learns %q; want %q", ab.Reason, reason)
	}
}

// A context cancelled during a call ends it with the cancellation and
// aborts the Comm for that reason.
func TestCancelledContextAborts(t *testing.T) {
	w := newWorld(t)
	cs := w.comms(t, stores(t, 2), nil)
	bufs := f32Buffers(t, w, 2, 4)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := cs[0].Broadcast(ctx, bufs[0], 1)
	var te *comm.TimeoutError
	if !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Fatalf("broadcast cancelled: %v; want the cancellation", err)
	}
	if err := cs[0].Barrier(context.Background()); !errors.Is(abortedBy(t, "after the cancellation", err, 0), context.Canceled) {
		t.Errorf("after the cancellation: %v; want this rank's abort for it", err)
	}
}

// A peer whose NCCL communicator is gone without a word in the Store (its
// process died) makes the call fail with this rank's abort wrapping
// NCCL's report, after the bounded look at the Store.
func TestPeerGoneWithoutReason(t *testing.T) {
	w := newWorld(t)
	cs := w.comms(t, stores(t, 2), nil)
	bufs := f32Buffers(t, w, 2, 4)
	// What a dying process leaves behind: its communicator gone, nothing
	// in the Store. (Marking it failed only lets Close skip the clean
	// shutdown.)
	cs[1].fail(cause{rank: 1, err: errors.New("died")})
	if err := cs[1].nc.Abort(); err != nil {
		t.Fatal(err)
	}
	err := cs[0].AllReduce(context.Background(), bufs[0], comm.Sum)
	abortedBy(t, "the call after the peer died", err, 0)
	if !nccl.IsResult(err, nccl.RemoteError) || !strings.Contains(err.Error(), "no rank published") {
		t.Errorf("the call after the peer died: %v; want NCCL's remote error, unexplained", err)
	}
}

// Ops a dtype cannot take are refused alike on every rank without ending
// the Comm.
func TestRefusedOpsLeaveTheCommHealthy(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	cs := w.comms(t, stores(t, 2), nil)
	var ints, u16s [2]backend.Buffer
	for r := range 2 {
		ints[r] = deviceBuffer(t, w.devs[r], backend.I32, 4, 0).Buffer
		u16s[r] = deviceBuffer(t, w.devs[r], backend.U16, 4, 0).Buffer
	}
	mustEach(t, 2, func(r int) error {
		i, u := ints[r], u16s[r]
		for what, err := range map[string]error{
			"avg of int32":   cs[r].AllReduce(ctx, i, comm.Avg),
			"sum of uint16":  cs[r].AllReduce(ctx, u, comm.Sum),
			"unknown op":     cs[r].AllReduce(ctx, i, comm.Op(9)),
			"max of uint16s": cs[r].ReduceScatter(ctx, u.Slice(0, 2), u, comm.Max),
		} {
			var ab *comm.AbortedError
			if err == nil || errors.As(err, &ab) {
				t.Errorf("rank %d %s: %v; want a plain refusal", r, what, err)
			}
		}
		return cs[r].Barrier(ctx)
	})
}

// The zero Buffer and arguments that disagree are caller bugs: they panic with a fixed message before any
// NCCL call, leaving the Comm usable.
func TestCallerBugsPanic(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	cs := w.comms(t, stores(t, 2), nil)
	c := cs[0]
	dev := deviceBuffer(t, w.devs[0], backend.F32, 8, 0).Buffer
	for name, call := range map[string]func(){
		"zero buffer":        func() { c.Broadcast(ctx, backend.Buffer{}, 0) },
		"scatter length":     func() { c.ReduceScatter(ctx, dev.Slice(0, 3), dev, comm.Sum) },
		"gather length":      func() { c.AllGather(ctx, dev.Slice(0, 3), dev.Slice(3, 2)) },
		"broadcast root":     func() { c.Broadcast(ctx, dev, 2) },
		"scatter dtypes":     func() { c.ReduceScatter(ctx, deviceBuffer(t, w.devs[0], backend.BF16, 4, 0).Buffer, dev, comm.Sum) },
		"negative broadcast": func() { c.Broadcast(ctx, dev, -1) },
	} {
		func() {
			defer func() {
				if msg, ok := recover().(string); !ok || !strings.HasPrefix(msg, "ncclcomm: ") {
					t.Errorf("%s: panic %q; want a fixed ncclcomm message", name, msg)
				}
			}()
			call()
		}()
	}
	mustEach(t, 2, func(r int) error { return cs[r].Barrier(ctx) })
}

// New refuses an NCCL older than 2.10.3 (no bf16, no avg), naming both
// versions, and Options that disagree with the Store.
func TestNewRefusals(t *testing.T) {
	w := newWorld(t, "MOCK_NCCL_VERSION=2708")
	sts := stores(t, 1)
	_, err := New(context.Background(), w.options(sts, 0))
	if err == nil || !strings.Contains(err.Error(), "2.10.3") || !strings.Contains(err.Error(), "2.7.8") {
		t.Errorf("New on NCCL 2.7.8: %v; want a refusal naming 2.7.8 and 2.10.3", err)
	}
	o := w.options(sts, 0)
	o.Size = 2
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "store") {
		t.Errorf("New with a size the store disagrees with: %v", err)
	}
	o = w.options(sts, 0)
	o.Lib = nil
	if _, err := New(context.Background(), o); err == nil {
		t.Errorf("New without a library succeeded")
	}
}

// Host-pool buffers (the trainer's bookkeeping, offloaded partitions) are
// staged through device memory: results land in host memory as they would
// in device memory, alone or mixed with device buffers in one call.
func TestHostBuffersAreStaged(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	cs := w.comms(t, stores(t, 2), nil)
	hostBuf := func(dt backend.DType, vals []float32) (backend.Buffer, []byte) {
		raw := make([]byte, 4*len(vals)+8)
		b := backend.NewBuffer(&backend.Memory{Host: raw, Pool: backend.Host, Bytes: len(raw)}, dt, len(vals)+2).Slice(1, len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(raw[4+4*i:], math.Float32bits(v))
		}
		return b, raw
	}
	got := make([][]byte, 2)
	gathered := make([][]byte, 2)
	mustEach(t, 2, func(r int) error {
		b, raw := hostBuf(backend.F32, []float32{float32(r + 1), 10 * float32(r+1), -3})
		if err := cs[r].AllReduce(ctx, b, comm.Sum); err != nil {
			return err
		}
		got[r] = raw
		src, _ := hostBuf(backend.F32, []float32{float32(100 * (r + 1)), float32(100*(r+1) + 1)})
		dst, draw := hostBuf(backend.F32, make([]float32, 4))
		if err := cs[r].AllGather(ctx, dst, src); err != nil {
			return err
		}
		gathered[r] = draw
		return nil
	})
	for r := 0; r < 2; r++ {
		f := func(raw []byte, i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(raw[4+4*i:])) }
		if f(got[r], 0) != 3 || f(got[r], 1) != 30 || f(got[r], 2) != -6 {
			t.Errorf("rank %d: host all-reduce gave %v %v %v, want 3 30 -6", r, f(got[r], 0), f(got[r], 1), f(got[r], 2))
		}
		if binary.LittleEndian.Uint32(got[r][0:]) != 0 || binary.LittleEndian.Uint32(got[r][16:]) != 0 {
			t.Errorf("rank %d: bytes outside the host view were written", r)
		}
		want := []float32{100, 101, 200, 201}
		for i, v := range want {
			if f(gathered[r], i) != v {
				t.Errorf("rank %d: host all-gather [%d] = %v, want %v", r, i, f(gathered[r], i), v)
			}
		}
	}
}
