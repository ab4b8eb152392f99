package commtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

const (
	// shortLimit is the deadline of calls that some peer never joins.
	shortLimit = 300 * time.Millisecond
	// lateBy is how long a test waits before it aborts, cancels or kills,
	// so that the calls it means to interrupt are blocked by then.
	lateBy = 100 * time.Millisecond
	// failSlack bounds how long after its cause a failed call may return.
	failSlack = 5 * time.Second
)

// others lists the ranks of a world of size but r.
func others(r, size int) []int {
	var o []int
	for q := range size {
		if q != r {
			o = append(o, q)
		}
	}
	return o
}

// zeros allocates n zeroed fp32 elements on every rank.
func (w *world) zeros(n int) []buf {
	bs := make([]buf, w.size())
	for r := range bs {
		bs[r] = w.filled(r, backend.F32, make([]float64, n))
	}
	return bs
}

// peersLearn has every rank but failed make call, the collective failed
// was in when it failed, and returns their errors by rank. A call may still
// complete on data failed sent before it failed; the call after it cannot,
// so a rank whose call succeeded makes it once more.
func (w *world) peersLearn(failed int, call func(r int) error) map[int]error {
	errs := OnEveryRank(w.size(), func(r int) error {
		if r == failed {
			return nil
		}
		if err := call(r); err != nil {
			return err
		}
		return call(r)
	})
	m := make(map[int]error)
	for _, r := range others(failed, w.size()) {
		m[r] = errs[r]
	}
	return m
}

// wantAborted returns err as a *comm.AbortedError by rank during op, or
// fails the test.
func wantAborted(t *testing.T, what string, err error, rank int, op comm.Kind) *comm.AbortedError {
	t.Helper()
	var ab *comm.AbortedError
	if !errors.As(err, &ab) || ab.Rank != rank || ab.Op != op {
		t.Fatalf("%s: %v; want a *comm.AbortedError by rank %d during %s", what, err, rank, op)
	}
	if want := fmt.Sprintf("%s aborted by rank %d", op, rank); !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: message %q does not say %q", what, err, want)
	}
	return ab
}

// wantTimeout returns err as a *comm.TimeoutError of op, from a call that
// took took under the limit limit, or fails the test. Its Peers must be
// missing ranks, in order, and all of them when all is set; a ring
// collective waits on its neighbour alone and may name only that one.
func (w *world) wantTimeout(what string, err error, op comm.Kind, limit, took time.Duration, missing []int, all bool) *comm.TimeoutError {
	t := w.t
	t.Helper()
	var te *comm.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) || te.Op != op {
		t.Fatalf("%s: %v; want a *comm.TimeoutError of the %s that matches context.DeadlineExceeded", what, err, op)
	}
	if took < limit-50*time.Millisecond || took > limit+failSlack || te.Elapsed < te.Timeout || te.Elapsed > took {
		t.Fatalf("%s: returned after %v, error says %v elapsed of %v; the limit was %v", what, took, te.Elapsed, te.Timeout, limit)
	}
	switch {
	case w.o.TimeoutPeersUnknown:
		if len(te.Peers) != 0 {
			t.Fatalf("%s: names ranks %v; Options.TimeoutPeersUnknown says it cannot", what, te.Peers)
		}
	case all && !slices.Equal(te.Peers, missing):
		t.Fatalf("%s: waited for ranks %v; want every missing rank, %v", what, te.Peers, missing)
	case len(te.Peers) == 0 || !slices.IsSorted(te.Peers) || slices.ContainsFunc(te.Peers, func(p int) bool { return !slices.Contains(missing, p) }):
		t.Fatalf("%s: waited for ranks %v; want some of the missing ranks %v, in order", what, te.Peers, missing)
	}
	if len(te.Peers) > 0 {
		who := fmt.Sprintf("ranks %v", te.Peers)
		if len(te.Peers) == 1 {
			who = fmt.Sprintf("rank %d", te.Peers[0])
		}
		if !strings.Contains(err.Error(), who) {
			t.Fatalf("%s: message %q does not name %s", what, err, who)
		}
	}
	return te
}

// testTimeout checks that a call no peer joins ends at its context's
// deadline, or at the Comm's own timeout, with a *comm.TimeoutError naming
// the ranks it waited for; that the Comm is then unusable here, with the
// timeout as the cause; and that every peer learns it (see peersLearn).
func (s *suite) testTimeout(t *testing.T) {
	size := s.needFailWorld(t)
	t.Run("deadline", func(t *testing.T) {
		w := s.world(t, size, callTimeout)
		bufs := w.zeros(1000)
		ctx, cancel := context.WithTimeout(context.Background(), shortLimit)
		defer cancel()
		start := time.Now()
		err := w.comm(0).AllReduce(ctx, bufs[0].Buffer, comm.Sum)
		te := w.wantTimeout("an all-reduce no peer joins", err, comm.KindAllReduce, shortLimit, time.Since(start), others(0, size), false)
		if te.Timeout > shortLimit || te.Timeout < shortLimit-50*time.Millisecond {
			t.Errorf("the error's Timeout is %v; the context allowed %v", te.Timeout, shortLimit)
		}
		later := w.comm(0).Barrier(context.Background())
		wantAborted(t, "rank 0's next call", later, 0, comm.KindBarrier)
		if !errors.As(later, &te) {
			t.Errorf("rank 0's next call: %v; want its timeout as the cause", later)
		}
		learnt := w.peersLearn(0, func(r int) error {
			return w.comm(r).AllReduce(context.Background(), bufs[r].Buffer, comm.Sum)
		})
		for r, err := range learnt {
			ab := wantAborted(t, fmt.Sprintf("rank %d's next all-reduce", r), err, 0, comm.KindAllReduce)
			if !strings.Contains(ab.Reason.Error(), "timed out") {
				t.Errorf("rank %d learns %q; want rank 0's timeout", r, ab.Reason)
			}
		}
	})
	t.Run("default", func(t *testing.T) {
		// A barrier hears from every rank, so it can name every missing one.
		w := s.world(t, size, shortLimit)
		start := time.Now()
		err := w.comm(0).Barrier(context.Background())
		te := w.wantTimeout("a barrier no peer joins", err, comm.KindBarrier, shortLimit, time.Since(start), others(0, size), true)
		if te.Timeout < shortLimit || te.Timeout > shortLimit+50*time.Millisecond {
			t.Errorf("the error's Timeout is %v; the Comm's timeout is %v", te.Timeout, shortLimit)
		}
	})
}

// testCancel checks that a context cancelled during a call ends it with the
// cancellation, not a timeout, and aborts the Comm for that reason.
func (s *suite) testCancel(t *testing.T) {
	size := s.needFailWorld(t)
	w := s.world(t, size, callTimeout)
	bufs := w.zeros(4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(lateBy, cancel)
	err := w.comm(0).Broadcast(ctx, bufs[0].Buffer, 1)
	var te *comm.TimeoutError
	if !errors.Is(err, context.Canceled) || errors.As(err, &te) {
		t.Fatalf("a broadcast whose context is cancelled: %v; want the cancellation", err)
	}
	later := w.comm(0).Barrier(context.Background())
	if wantAborted(t, "the next call", later, 0, comm.KindBarrier); !errors.Is(later, context.Canceled) {
		t.Errorf("the next call: %v; want the cancellation as the cause", later)
	}
}

// testAbort checks that Abort ends the calls peers are blocked in and this
// rank's own, with its rank and reason; that a second Abort keeps the first
// reason; and that Abort(nil) aborts too.
func (s *suite) testAbort(t *testing.T) {
	t.Run("nil reason", func(t *testing.T) {
		size := s.o.peersSize()
		w := s.world(t, size, callTimeout)
		w.comm(0).Abort(nil)
		errs := OnEveryRank(size, func(r int) error { return w.comm(r).Barrier(context.Background()) })
		for r, err := range errs {
			wantAborted(t, fmt.Sprintf("rank %d's barrier after rank 0's Abort(nil)", r), err, 0, comm.KindBarrier)
		}
	})
	t.Run("blocked peers", func(t *testing.T) {
		size := s.needFailWorld(t)
		w := s.world(t, size, callTimeout)
		k := size - 1
		bufs := w.zeros(1000)
		reason := errors.New("loss is NaN at step 12")
		errs := OnEveryRank(size, func(r int) error {
			if r == k {
				time.Sleep(lateBy)
				w.comm(k).Abort(reason)
				return nil
			}
			return w.comm(r).AllReduce(context.Background(), bufs[r].Buffer, comm.Sum)
		})
		for _, r := range others(k, size) {
			ab := wantAborted(t, fmt.Sprintf("rank %d, blocked when rank %d aborted", r, k), errs[r], k, comm.KindAllReduce)
			if ab.Reason == nil || ab.Reason.Error() != reason.Error() {
				t.Errorf("rank %d learns %v; want rank %d's reason %q", r, ab.Reason, k, reason)
			}
		}
		later := w.comm(k).AllGather(context.Background(), w.alloc(k, backend.F32, size).Buffer, bufs[k].part(0, 1).Buffer)
		if wantAborted(t, "the aborting rank's next call", later, k, comm.KindAllGather); !errors.Is(later, reason) {
			t.Errorf("the aborting rank's next call: %v; want its own reason", later)
		}
	})
	t.Run("own blocked call", func(t *testing.T) {
		size := s.needFailWorld(t)
		w := s.world(t, size, callTimeout)
		src := w.zeros(size * 2)
		dst := w.zeros(2)
		reason := errors.New("operator pressed stop")
		time.AfterFunc(lateBy, func() { w.comm(0).Abort(reason) })
		err := w.comm(0).ReduceScatter(context.Background(), dst[0].Buffer, src[0].Buffer, comm.Sum)
		if wantAborted(t, "the call blocked when Abort came", err, 0, comm.KindReduceScatter); !errors.Is(err, reason) {
			t.Fatalf("the call blocked when Abort came: %v; want the abort's reason", err)
		}
		w.comm(0).Abort(errors.New("second thoughts"))
		if err := w.comm(0).Barrier(context.Background()); !errors.Is(err, reason) {
			t.Errorf("after a second Abort: %v; want the first reason", err)
		}
		learnt := w.peersLearn(0, func(r int) error {
			return w.comm(r).ReduceScatter(context.Background(), dst[r].Buffer, src[r].Buffer, comm.Sum)
		})
		for r, err := range learnt {
			ab := wantAborted(t, fmt.Sprintf("rank %d's next reduce-scatter", r), err, 0, comm.KindReduceScatter)
			if ab.Reason == nil || ab.Reason.Error() != reason.Error() {
				t.Errorf("rank %d learns %v; want %q", r, ab.Reason, reason)
			}
		}
	})
}

// wantLost fails the test unless err is what a survivor of rank victim's
// death gets during op: a *comm.PeerLostError naming it, or under
// Options.PeerLossAsAbort a *comm.AbortedError by a surviving rank.
func (w *world) wantLost(what string, err error, victim int, op comm.Kind) {
	t := w.t
	t.Helper()
	if w.o.PeerLossAsAbort {
		var ab *comm.AbortedError
		if !errors.As(err, &ab) || ab.Rank == victim || ab.Op != op {
			t.Fatalf("%s: %v; want a *comm.AbortedError by a surviving rank during %s", what, err, op)
		}
		return
	}
	var pl *comm.PeerLostError
	if !errors.As(err, &pl) || pl.Rank != victim || pl.Op != op {
		t.Fatalf("%s: %v; want a *comm.PeerLostError naming rank %d during %s", what, err, victim, op)
	}
	if want := fmt.Sprintf("lost rank %d during %s", victim, op); !strings.Contains(err.Error(), want) {
		t.Fatalf("%s: message %q does not say %q", what, err, want)
	}
}

// testPeerLoss kills a rank (Options.Kill) while the others are blocked on
// it, and while every rank is busy with all-reduces: each survivor's call
// fails promptly naming it, and so does every later call.
func (s *suite) testPeerLoss(t *testing.T) {
	size := s.needFailWorld(t)
	if s.o.Kill == nil {
		t.Skip("Options.Kill is nil: the implementation cannot lose a peer, or its test cannot kill one")
	}
	victim := size - 1
	t.Run("while the others wait", func(t *testing.T) {
		w := s.world(t, size, callTimeout)
		bufs := w.zeros(100003)
		start := time.Now()
		errs := OnEveryRank(size, func(r int) error {
			if r == victim {
				time.Sleep(lateBy)
				s.o.Kill(w.comm(victim))
				return nil
			}
			return w.comm(r).AllReduce(context.Background(), bufs[r].Buffer, comm.Sum)
		})
		if took := time.Since(start); took > lateBy+failSlack {
			t.Errorf("the survivors returned %v after the peer died", took-lateBy)
		}
		for _, r := range others(victim, size) {
			w.wantLost(fmt.Sprintf("rank %d", r), errs[r], victim, comm.KindAllReduce)
			w.wantLost(fmt.Sprintf("rank %d's next call", r), w.comm(r).Barrier(context.Background()), victim, comm.KindBarrier)
		}
	})
	t.Run("mid-traffic", func(t *testing.T) {
		w := s.world(t, size, callTimeout)
		bufs := w.zeros(30011)
		busy := make(chan struct{})
		var once sync.Once
		ctx, cancel := context.WithTimeout(context.Background(), failSlack)
		defer cancel()
		go func() {
			select {
			case <-busy:
				time.Sleep(5 * time.Millisecond)
				s.o.Kill(w.comm(victim))
			case <-ctx.Done():
			}
		}()
		errs := OnEveryRank(size, func(r int) error {
			for i := 0; ; i++ {
				if i == 2 {
					once.Do(func() { close(busy) })
				}
				if err := w.comm(r).AllReduce(ctx, bufs[r].Buffer, comm.Sum); err != nil {
					return err
				}
			}
		})
		for _, r := range others(victim, size) {
			w.wantLost(fmt.Sprintf("rank %d", r), errs[r], victim, comm.KindAllReduce)
		}
	})
}

// disagreeingCall is rank r's part in a call of a world of size on which
// the last rank disagrees with the others in the way d.
func (w *world) disagreeingCall(d Disagreement, bufs, bf16s, longs []buf) func(ctx context.Context, r int) error {
	last := w.size() - 1
	return func(ctx context.Context, r int) error {
		c, b, odd := w.comm(r), bufs[r].Buffer, r == last
		switch {
		case d == DisagreeKind && odd:
			return c.Broadcast(ctx, b, 0)
		case d == DisagreeLength && odd:
			return c.AllReduce(ctx, longs[r].Buffer, comm.Sum)
		case d == DisagreeDType && odd:
			return c.AllReduce(ctx, bf16s[r].Buffer, comm.Sum)
		case d == DisagreeOp && odd:
			return c.AllReduce(ctx, b, comm.Max)
		case d == DisagreeRoot:
			root := 0
			if odd {
				root = 1
			}
			return c.Broadcast(ctx, b, root)
		}
		return c.AllReduce(ctx, b, comm.Sum)
	}
}

// testDisagreement has the last rank disagree with the others on one call,
// in each of the ways the ranks can. What the implementation detects must
// fail on every rank (in the call, or for a rank whose part happened to
// complete, in its next one) with a *comm.AbortedError saying the ranks
// disagree, well before the deadline; what it cannot detect must end at the
// deadline with a *comm.TimeoutError on some rank. Nothing may hang.
func (s *suite) testDisagreement(t *testing.T) {
	size := s.needFailWorld(t)
	for _, d := range Disagreements() {
		t.Run(d.String(), func(t *testing.T) {
			w := s.world(t, size, callTimeout)
			bufs, longs := w.zeros(12), w.zeros(13)
			bf16s := make([]buf, size)
			for r := range bf16s {
				bf16s[r] = w.filled(r, backend.BF16, make([]float64, 12))
			}
			call := w.disagreeingCall(d, bufs, bf16s, longs)
			undetected := slices.Contains(s.o.Undetected, d)
			limit := failSlack
			if undetected {
				limit = time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), limit)
			defer cancel()
			start := time.Now()
			errs := OnEveryRank(size, func(r int) error { return call(ctx, r) })
			if took := time.Since(start); took > limit+failSlack {
				t.Fatalf("the disagreeing call returned after %v, its deadline was %v", took, limit)
			}
			var te *comm.TimeoutError
			if undetected {
				if !slices.ContainsFunc(errs, func(err error) bool { return errors.As(err, &te) }) {
					t.Fatalf("an undetected disagreement (Options.Undetected) ended with %v; want a *comm.TimeoutError on some rank", errs)
				}
				return
			}
			// A rank whose part completed learns from its next call.
			next := OnEveryRank(size, func(r int) error {
				if errs[r] != nil {
					return nil
				}
				ctx, cancel := context.WithTimeout(context.Background(), failSlack)
				defer cancel()
				return w.comm(r).Barrier(ctx)
			})
			for r := range size {
				err := cmp.Or(errs[r], next[r])
				var ab *comm.AbortedError
				if !errors.As(err, &ab) || errors.As(err, &te) || !strings.Contains(err.Error(), "disagree") {
					t.Errorf("rank %d: %v; want a *comm.AbortedError saying the ranks disagree, before the deadline", r, err)
				}
				later := w.comm(r).Barrier(context.Background())
				if !errors.As(later, &ab) || !strings.Contains(later.Error(), "disagree") {
					t.Errorf("rank %d's later call: %v; want the same cause", r, later)
				}
			}
		})
	}
}
