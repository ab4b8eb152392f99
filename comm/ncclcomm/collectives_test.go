package ncclcomm

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// reduceRef is op over the ranks' values, in float64: the sum, the sum
// divided by the number of ranks, or the maximum.
func reduceRef(vals []float64, op comm.Op) float64 {
	acc := vals[0]
	for _, v := range vals[1:] {
		if op == comm.Max {
			acc = math.Max(acc, v)
		} else {
			acc += v
		}
	}
	if op == comm.Avg {
		acc /= float64(len(vals))
	}
	return acc
}

// checkRanks compares every rank's result with want (near in dtype dt)
// and checks that every rank holds the same bits.
func checkRanks(t *testing.T, what string, w *world, bufs []tbuf, want []float64) {
	t.Helper()
	var first []byte
	for r, b := range bufs {
		padIntact(t, w.devs[r], b)
		got, raw := get(t, w.devs[r], b)
		for i := range want {
			if !near(got[i], want[i], b.DType()) {
				t.Fatalf("%s: rank %d element %d = %v, want %v (%s)", what, r, i, got[i], want[i], b.DType())
			}
		}
		if r == 0 {
			first = raw
		} else if !bytes.Equal(raw, first) {
			t.Fatalf("%s: rank %d's bits differ from rank 0's", what, r)
		}
	}
}

// Every collective, dtype and op on worlds of 1, 2 and 4 ranks, against
// float64 references computed here; buffers are views at an offset into
// their allocation, with odd lengths.
func TestCollectivesMatchReference(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, size := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("ranks=%d", size), func(t *testing.T) {
			cs := w.comms(t, stores(t, size), nil)
			rng := rand.New(rand.NewPCG(uint64(size), 7))
			const n = 21
			for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16, backend.I32} {
				ops := []comm.Op{comm.Sum, comm.Avg, comm.Max}
				if dt == backend.I32 {
					ops = []comm.Op{comm.Sum, comm.Max}
				}
				for _, op := range ops {
					t.Run(fmt.Sprintf("%s/%s", dt, op), func(t *testing.T) {
						testAllReduce(t, ctx, w, cs, rng, dt, op, n)
						testReduceScatter(t, ctx, w, cs, rng, dt, op, 7)
					})
				}
			}
			for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16, backend.I32, backend.U16} {
				t.Run(dt.String()+"/move", func(t *testing.T) {
					testAllGather(t, ctx, w, cs, rng, dt, n)
					testBroadcast(t, ctx, w, cs, rng, dt, n, size-1)
					testBroadcast(t, ctx, w, cs, rng, dt, n, 0)
				})
			}
		})
	}
}

func testAllReduce(t *testing.T, ctx context.Context, w *world, cs []*Comm, rng *rand.Rand, dt backend.DType, op comm.Op, n int) {
	size := len(cs)
	bufs := make([]tbuf, size)
	in := make([][]float64, size)
	for r := range cs {
		bufs[r] = deviceBuffer(t, w.devs[r], dt, n, 3)
		in[r] = randomVals(rng, n, dt)
		put(t, w.devs[r], bufs[r], in[r])
	}
	mustEach(t, size, func(r int) error { return cs[r].AllReduce(ctx, bufs[r].Buffer, op) })
	want := make([]float64, n)
	for i := range want {
		col := make([]float64, size)
		for r := range in {
			col[r] = in[r][i]
		}
		want[i] = reduceRef(col, op)
	}
	checkRanks(t, "all-reduce", w, bufs, want)
}

func testReduceScatter(t *testing.T, ctx context.Context, w *world, cs []*Comm, rng *rand.Rand, dt backend.DType, op comm.Op, n int) {
	size := len(cs)
	src := make([]tbuf, size)
	dst := make([]tbuf, size)
	in := make([][]float64, size)
	for r := range cs {
		src[r] = deviceBuffer(t, w.devs[r], dt, size*n, 1)
		dst[r] = deviceBuffer(t, w.devs[r], dt, n, 5)
		in[r] = randomVals(rng, size*n, dt)
		put(t, w.devs[r], src[r], in[r])
	}
	mustEach(t, size, func(r int) error { return cs[r].ReduceScatter(ctx, dst[r].Buffer, src[r].Buffer, op) })
	for r := range cs {
		want := make([]float64, n)
		for i := range want {
			col := make([]float64, size)
			for q := range in {
				col[q] = in[q][r*n+i]
			}
			want[i] = reduceRef(col, op)
		}
		checkRanks(t, fmt.Sprintf("reduce-scatter chunk %d", r), w, []tbuf{dst[r]}, want)
	}
}

func testAllGather(t *testing.T, ctx context.Context, w *world, cs []*Comm, rng *rand.Rand, dt backend.DType, n int) {
	size := len(cs)
	src := make([]tbuf, size)
	dst := make([]tbuf, size)
	var want []float64
	for r := range cs {
		src[r] = deviceBuffer(t, w.devs[r], dt, n, 2)
		dst[r] = deviceBuffer(t, w.devs[r], dt, size*n, 1)
		in := randomVals(rng, n, dt)
		put(t, w.devs[r], src[r], in)
		want = append(want, in...)
	}
	mustEach(t, size, func(r int) error { return cs[r].AllGather(ctx, dst[r].Buffer, src[r].Buffer) })
	checkRanks(t, "all-gather", w, dst, want)
}

func testBroadcast(t *testing.T, ctx context.Context, w *world, cs []*Comm, rng *rand.Rand, dt backend.DType, n, root int) {
	size := len(cs)
	bufs := make([]tbuf, size)
	var want []float64
	for r := range cs {
		bufs[r] = deviceBuffer(t, w.devs[r], dt, n, 1)
		in := randomVals(rng, n, dt)
		put(t, w.devs[r], bufs[r], in)
		if r == root {
			want = in
		}
	}
	mustEach(t, size, func(r int) error { return cs[r].Broadcast(ctx, bufs[r].Buffer, root) })
	checkRanks(t, fmt.Sprintf("broadcast from %d", root), w, bufs, want)
}

// Stats count each successful call once per kind with DeepSpeed's byte
// convention (the whole buffer; the Size·n side of the sharded ops; 0 for
// a barrier), and empty messages count as calls of 0 bytes.
func TestStats(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	cs := w.comms(t, stores(t, 2), nil)
	const n = 10
	type bufs struct{ a, b, f, empty tbuf }
	bs := make([]bufs, 2)
	for r := range bs {
		bs[r] = bufs{
			a:     deviceBuffer(t, w.devs[r], backend.BF16, 2*n, 0),
			b:     deviceBuffer(t, w.devs[r], backend.BF16, n, 0),
			f:     deviceBuffer(t, w.devs[r], backend.F32, n, 0),
			empty: deviceBuffer(t, w.devs[r], backend.F32, 0, 1),
		}
		put(t, w.devs[r], bs[r].a, make([]float64, 2*n))
		put(t, w.devs[r], bs[r].f, make([]float64, n))
	}
	mustEach(t, 2, func(r int) error {
		c, b := cs[r], bs[r]
		for _, err := range []error{
			c.AllReduce(ctx, b.f.Buffer, comm.Sum),
			c.AllReduce(ctx, b.empty.Buffer, comm.Avg),
			c.ReduceScatter(ctx, b.b.Buffer, b.a.Buffer, comm.Sum),
			c.AllGather(ctx, b.a.Buffer, b.b.Buffer),
			c.AllGather(ctx, b.a.Buffer, b.b.Buffer),
			c.Broadcast(ctx, b.f.Buffer, 1),
			c.Barrier(ctx),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	want := map[comm.Kind]comm.OpStats{
		comm.KindAllReduce:     {Calls: 2, Bytes: 4 * n},
		comm.KindReduceScatter: {Calls: 1, Bytes: 2 * 2 * n},
		comm.KindAllGather:     {Calls: 2, Bytes: 2 * 2 * 2 * n},
		comm.KindBroadcast:     {Calls: 1, Bytes: 4 * n},
		comm.KindBarrier:       {Calls: 1, Bytes: 0},
	}
	for r, c := range cs {
		st := c.Stats()
		for _, k := range comm.Kinds() {
			got := st.Of(k)
			if got.Calls != want[k].Calls || got.Bytes != want[k].Bytes || got.Seconds <= 0 {
				t.Errorf("rank %d %s: %+v, want %d calls, %d bytes, seconds > 0", r, k, got, want[k].Calls, want[k].Bytes)
			}
		}
	}
}

// A barrier returns on no rank before the last rank entered it, and many
// barriers in a row keep working.
func TestBarrierWaitsForEveryRank(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	const size = 4
	cs := w.comms(t, stores(t, size), nil)
	var lateEntered atomic.Int64 // unix nanoseconds
	returned := make([]time.Time, size)
	mustEach(t, size, func(r int) error {
		if r == size-1 {
			time.Sleep(100 * time.Millisecond)
			lateEntered.Store(time.Now().UnixNano())
		}
		err := cs[r].Barrier(ctx)
		returned[r] = time.Now()
		return err
	})
	for r, at := range returned {
		if at.UnixNano() < lateEntered.Load() {
			t.Errorf("rank %d left the barrier before rank %d entered it", r, size-1)
		}
	}
	mustEach(t, size, func(r int) error {
		for i := 0; i < 40; i++ {
			if err := cs[r].Barrier(ctx); err != nil {
				return fmt.Errorf("barrier %d: %w", i, err)
			}
		}
		return nil
	})
}

// Comms of one name made one after another on the same Store pair up by
// their order on each rank, and each works.
func TestSuccessiveCommsOfOneName(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	sts := stores(t, 2)
	rng := rand.New(rand.NewPCG(3, 3))
	for round := 0; round < 3; round++ {
		cs := w.comms(t, sts, nil)
		testAllReduce(t, ctx, w, cs, rng, backend.F32, comm.Sum, 5)
		for r, c := range cs {
			if err := c.Close(); err != nil {
				t.Fatalf("round %d: close rank %d: %v", round, r, err)
			}
		}
	}
}

// Close returns the Comm's device memory and makes later calls fail; it
// is idempotent.
func TestCloseReleasesDeviceMemory(t *testing.T) {
	w := newWorld(t)
	free := func(r int) uint64 {
		f, _, err := w.devs[r].MemInfo()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	before := []uint64{free(0), free(1)}
	cs := w.comms(t, stores(t, 2), nil)
	if free(0) >= before[0] {
		t.Fatalf("New allocated no device memory (free %d, before %d)", free(0), before[0])
	}
	for r, c := range cs {
		if err := c.Close(); err != nil {
			t.Fatalf("close rank %d: %v", r, err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second close of rank %d: %v", r, err)
		}
		if got := free(r); got != before[r] {
			t.Errorf("rank %d: %d bytes free after Close, %d before New", r, got, before[r])
		}
	}
	if err := cs[0].Barrier(context.Background()); err == nil {
		t.Errorf("Barrier after Close succeeded")
	}
}
