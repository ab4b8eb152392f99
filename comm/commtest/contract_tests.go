package commtest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// testDeterminism runs the same reductions three times in one world and
// once more in a fresh one: every rank, every repetition and every run must
// produce the same bits, including for fp32 sums that round.
func (s *suite) testDeterminism(t *testing.T) {
	size := s.o.maxSize()
	rng := rand.New(rand.NewPCG(11, 0x64657465))
	wide := make([][]float64, size)
	scatter := make([][]float64, size)
	for r := range size {
		wide[r] = wideInputs(rng, 4099)
		scatter[r] = wideInputs(rng, size*1031)
	}
	var exact [][]float64
	runOnce := func(w *world) [][]byte {
		var res [][]byte
		for _, op := range []comm.Op{comm.Sum, comm.Avg} {
			if !s.o.Refuses(backend.F32, op) {
				res = append(res, w.allReduce(backend.F32, op, wide))
				res = append(res, w.reduceScatter(backend.F32, op, scatter, false))
			}
		}
		if !s.o.Refuses(backend.BF16, comm.Sum) {
			if exact == nil {
				exact = w.inputs(rng, backend.BF16, 4099)
			}
			res = append(res, w.allReduce(backend.BF16, comm.Sum, exact))
		}
		return res
	}
	w := s.world(t, size, callTimeout)
	first := runOnce(w)
	for rep := 1; rep < 3; rep++ {
		sameResults(t, fmt.Sprintf("repetition %d", rep), runOnce(w), first)
	}
	sameResults(t, "a fresh world", runOnce(s.world(t, size, callTimeout)), first)
}

// sameResults fails t unless got has want's bits, result by result.
func sameResults(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: result %d differs in its bits from the first run's", what, i)
		}
	}
}

// testBarrier checks that no rank leaves a barrier before every rank
// entered it, round after round, with one rank arriving late.
func (s *suite) testBarrier(t *testing.T) {
	size := s.o.maxSize()
	w := s.world(t, size, callTimeout)
	const rounds = 20
	var entered [rounds]atomic.Int64
	w.each("barriers", func(r int) error {
		for round := range rounds {
			if round == 0 && r == size-1 {
				time.Sleep(50 * time.Millisecond)
			}
			entered[round].Add(1)
			if err := w.comm(r).Barrier(context.Background()); err != nil {
				return fmt.Errorf("barrier %d: %w", round, err)
			}
			if n := entered[round].Load(); n != int64(size) {
				return fmt.Errorf("left barrier %d when only %d of %d ranks had entered it", round, n, size)
			}
		}
		return nil
	})
}

// testStats checks that every successful call counts once under its kind
// with DeepSpeed's byte convention (the buffer for all-reduce and
// broadcast, the Size·n side of the sharded ops, 0 for a barrier, 0 for an
// empty message) and some time; or, under Options.NoStats, that nothing is
// counted.
func (s *suite) testStats(t *testing.T) {
	size := s.o.peersSize()
	w := s.world(t, size, callTimeout)
	const n = 10
	type bufs struct{ f, empty, part, whole buf }
	bs := make([]bufs, size)
	for r := range bs {
		bs[r] = bufs{
			f:     w.filled(r, backend.F32, make([]float64, n)),
			empty: w.alloc(r, backend.F32, 0),
			part:  w.filled(r, backend.BF16, make([]float64, n)),
			whole: w.filled(r, backend.BF16, make([]float64, size*n)),
		}
	}
	w.each("the counted calls", func(r int) error {
		c, b, ctx := w.comm(r), bs[r], context.Background()
		return inOrder(
			func() error { return c.AllReduce(ctx, b.f.Buffer, comm.Sum) },
			func() error { return c.AllReduce(ctx, b.empty.Buffer, comm.Sum) },
			func() error { return c.ReduceScatter(ctx, b.part.Buffer, b.whole.Buffer, comm.Max) },
			func() error { return c.AllGather(ctx, b.whole.Buffer, b.part.Buffer) },
			func() error { return c.AllGather(ctx, b.whole.Buffer, b.part.Buffer) },
			func() error { return c.Broadcast(ctx, b.f.Buffer, size-1) },
			func() error { return c.Barrier(ctx) },
		)
	})
	want := map[comm.Kind]comm.OpStats{
		comm.KindAllReduce:     {Calls: 2, Bytes: 4 * n},
		comm.KindReduceScatter: {Calls: 1, Bytes: 2 * int64(size) * n},
		comm.KindAllGather:     {Calls: 2, Bytes: 2 * 2 * int64(size) * n},
		comm.KindBroadcast:     {Calls: 1, Bytes: 4 * n},
		comm.KindBarrier:       {Calls: 1},
	}
	for r := range size {
		st := w.comm(r).Stats()
		if s.o.NoStats {
			if st != (comm.Stats{}) {
				t.Errorf("rank %d: Stats %+v; Options.NoStats says they stay empty", r, st)
			}
			continue
		}
		for _, k := range comm.Kinds() {
			got := st.Of(k)
			if got.Calls != want[k].Calls || got.Bytes != want[k].Bytes || got.Seconds <= 0 {
				t.Errorf("rank %d %s: %+v; want %d calls of %d bytes in all, seconds > 0", r, k, got, want[k].Calls, want[k].Bytes)
			}
		}
	}
}

// testCallerBugs checks that arguments whose lengths disagree, and a
// broadcast root outside the world, panic with a message before anything
// is sent, leaving the Comm usable.
func (s *suite) testCallerBugs(t *testing.T) {
	size := s.o.maxSize()
	w := s.world(t, size, callTimeout)
	c, ctx := w.comm(0), context.Background()
	part := w.alloc(0, backend.F32, 3).Buffer
	long := w.alloc(0, backend.F32, size*3+1).Buffer
	buf := w.alloc(0, backend.F32, 3).Buffer
	for what, call := range map[string]func(){
		"reduce-scatter whose src is not Size·len(dst)": func() { c.ReduceScatter(ctx, part, long, comm.Sum) },
		"all-gather whose dst is not Size·len(src)":     func() { c.AllGather(ctx, long, part) },
		"broadcast from root Size":                      func() { c.Broadcast(ctx, buf, size) },
		"broadcast from root -1":                        func() { c.Broadcast(ctx, buf, -1) },
	} {
		func() {
			defer func() {
				v := recover()
				if msg, ok := v.(string); !ok || msg == "" {
					t.Errorf("%s: panic value %#v; want a panic with a fixed message", what, v)
				}
			}()
			call()
		}()
	}
	w.healthy("the panics")
}
