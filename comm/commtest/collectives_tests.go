package commtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// dtypes lists every dtype a Buffer can have.
func dtypes() []backend.DType {
	return []backend.DType{backend.F32, backend.BF16, backend.F16, backend.I32, backend.U16}
}

// ops lists every reduction.
func ops() []comm.Op { return []comm.Op{comm.Sum, comm.Avg, comm.Max} }

// testCollectives checks every collective, dtype and op on every world
// size against float64 references, on guarded views, with lengths that do
// not divide evenly among the ranks (fewer elements than ranks included).
func (s *suite) testCollectives(t *testing.T) {
	for _, size := range s.o.Sizes {
		t.Run(fmt.Sprintf("ranks=%d", size), func(t *testing.T) {
			w0 := s.world(t, size, callTimeout)
			rng := rand.New(rand.NewPCG(uint64(size), 0x636f6d6d))
			for _, dt := range dtypes() {
				t.Run(dt.String(), func(t *testing.T) {
					w := w0.on(t)
					for _, op := range ops() {
						if s.o.Refuses(dt, op) {
							w.refused(rng, dt, op)
							continue
						}
						for _, n := range []int{1, 13, 1031} {
							w.allReduce(dt, op, w.inputs(rng, dt, n))
						}
						for _, m := range []int{1, 5, 257} {
							w.reduceScatter(dt, op, w.inputs(rng, dt, size*m), false)
						}
						w.reduceScatter(dt, op, w.inputs(rng, dt, size*5), true)
					}
					for _, m := range []int{1, 13, 1031} {
						w.allGather(dt, w.inputs(rng, dt, m), false)
					}
					w.allGather(dt, w.inputs(rng, dt, 13), true)
					for root := range size {
						w.broadcast(dt, w.inputs(rng, dt, 13), root)
					}
				})
			}
			t.Run("fp32 sums that round", func(t *testing.T) {
				w := w0.on(t)
				wide := func(n int) [][]float64 {
					ins := make([][]float64, size)
					for r := range ins {
						ins[r] = wideInputs(rng, n)
					}
					return ins
				}
				for _, op := range []comm.Op{comm.Sum, comm.Avg} {
					if !s.o.Refuses(backend.F32, op) {
						w.allReduce(backend.F32, op, wide(1031))
						w.reduceScatter(backend.F32, op, wide(size*257), false)
					}
				}
			})
			t.Run("NaN", func(t *testing.T) { w0.on(t).nanMax(rng) })
			t.Run("empty", func(t *testing.T) { w0.on(t).empty() })
			t.Run("large", func(t *testing.T) {
				// Messages of more than a megabyte: several of comm/tcp's
				// default segments.
				w := w0.on(t)
				if !s.o.Refuses(backend.F32, comm.Sum) {
					w.allReduce(backend.F32, comm.Sum, w.inputs(rng, backend.F32, 300007))
					w.reduceScatter(backend.F32, comm.Sum, w.inputs(rng, backend.F32, size*70001), false)
				}
				if !s.o.Refuses(backend.BF16, comm.Avg) {
					w.allReduce(backend.BF16, comm.Avg, w.inputs(rng, backend.BF16, 300007))
				}
				w.allGather(backend.BF16, w.inputs(rng, backend.BF16, 70001), false)
				w.broadcast(backend.F32, w.inputs(rng, backend.F32, 300007), size-1)
			})
		})
	}
}

// on is w for the subtest t (failures and cleanups go to t).
func (w *world) on(t *testing.T) *world {
	c := *w
	c.t = t
	return &c
}

// inputs returns every rank's n exact values of dt.
func (w *world) inputs(rng *rand.Rand, dt backend.DType, n int) [][]float64 {
	ins := make([][]float64, w.size())
	for r := range ins {
		ins[r] = exactInputs(rng, dt, n)
	}
	return ins
}

// checkReduced fails the test unless got (one rank's result, element i)
// is op over element i of ins (every rank's input).
func (w *world) checkReduced(what string, got []float64, ins [][]float64, dt backend.DType, op comm.Op) {
	w.t.Helper()
	bad := 0
	for i := range got {
		col := column(ins, i)
		if ok, want := w.o.reducedOK(got[i], col, dt, op); !ok {
			if bad < 5 {
				w.t.Errorf("%s: element %d = %v, want %v (inputs %v)", what, i, got[i], want, col)
			}
			bad++
		}
	}
	if bad > 0 {
		w.t.Fatalf("%s: %d of %d elements wrong", what, bad, len(got))
	}
}

// sameBits fails the test unless every rank's result has rank 0's bits.
func (w *world) sameBits(what string, raws [][]byte) {
	w.t.Helper()
	for r := 1; r < len(raws); r++ {
		if !bytes.Equal(raws[r], raws[0]) {
			w.t.Fatalf("%s: rank %d's result differs from rank 0's in its bits", what, r)
		}
	}
}

// allReduce all-reduces ins[r] on every rank r and checks the results.
// It returns rank 0's result bits.
func (w *world) allReduce(dt backend.DType, op comm.Op, ins [][]float64) []byte {
	w.t.Helper()
	what := fmt.Sprintf("all-reduce(%s) of %s on %d ranks", op, describe(dt, len(ins[0])), w.size())
	bufs := make([]buf, w.size())
	for r := range bufs {
		bufs[r] = w.filled(r, dt, ins[r])
	}
	w.each(what, func(r int) error { return w.comm(r).AllReduce(context.Background(), bufs[r].Buffer, op) })
	raws := make([][]byte, w.size())
	for r, b := range bufs {
		var got []float64
		got, raws[r] = w.get(what, b)
		if r == 0 {
			w.checkReduced(what, got, ins, dt, op)
		}
	}
	w.sameBits(what, raws)
	return raws[0]
}

// reduceScatter reduce-scatters ins[r] (Size·m values) on every rank r,
// in place (dst the rank's own chunk of src, as NCCL defines in-place)
// or into a separate dst, and checks each rank's chunk. It returns every
// rank's result bits, concatenated.
func (w *world) reduceScatter(dt backend.DType, op comm.Op, ins [][]float64, inPlace bool) []byte {
	w.t.Helper()
	size := w.size()
	m := len(ins[0]) / size
	what := fmt.Sprintf("reduce-scatter(%s) of %s on %d ranks", op, describe(dt, len(ins[0])), size)
	if inPlace {
		what = "in-place " + what
	}
	src := make([]buf, size)
	dst := make([]buf, size)
	for r := range size {
		src[r] = w.filled(r, dt, ins[r])
		if inPlace {
			dst[r] = src[r].part(r*m, m)
		} else {
			dst[r] = w.alloc(r, dt, m)
		}
	}
	w.each(what, func(r int) error {
		return w.comm(r).ReduceScatter(context.Background(), dst[r].Buffer, src[r].Buffer, op)
	})
	var all []byte
	for r := range size {
		chunk := make([][]float64, size)
		for q := range size {
			chunk[q] = ins[q][r*m : (r+1)*m]
		}
		got, raw := w.get(what, dst[r])
		w.checkReduced(fmt.Sprintf("%s, rank %d's chunk", what, r), got, chunk, dt, op)
		all = append(all, raw...)
		if !inPlace {
			if left, _ := w.get(what+" (its source)", src[r]); !slices.Equal(left, ins[r]) {
				w.t.Fatalf("%s: rank %d's source changed", what, r)
			}
		}
	}
	return all
}

// allGather gathers ins[r] (m values) from every rank r, from a separate
// src or in place (src is the rank's own chunk of dst), and checks that
// every rank holds them all in rank order.
func (w *world) allGather(dt backend.DType, ins [][]float64, inPlace bool) {
	w.t.Helper()
	size := w.size()
	m := len(ins[0])
	what := fmt.Sprintf("all-gather of %s per rank on %d ranks", describe(dt, m), size)
	if inPlace {
		what = "in-place " + what
	}
	var want []float64
	for _, in := range ins {
		want = append(want, in...)
	}
	src := make([]buf, size)
	dst := make([]buf, size)
	for r := range size {
		if inPlace {
			// The other chunks hold what was there before: rank r's
			// input repeated, which no correct result contains.
			before := slices.Repeat(ins[r], size)
			dst[r] = w.filled(r, dt, before)
			src[r] = dst[r].part(r*m, m)
		} else {
			src[r] = w.filled(r, dt, ins[r])
			dst[r] = w.alloc(r, dt, size*m)
		}
	}
	w.each(what, func(r int) error { return w.comm(r).AllGather(context.Background(), dst[r].Buffer, src[r].Buffer) })
	raws := make([][]byte, size)
	for r := range size {
		var got []float64
		got, raws[r] = w.get(what, dst[r])
		if i := firstDiff(got, want); i >= 0 {
			w.t.Fatalf("%s: rank %d's element %d (chunk %d) = %v, want %v", what, r, i, i/max(m, 1), got[i], want[i])
		}
	}
	w.sameBits(what, raws)
}

// broadcast broadcasts root's ins[root] over every rank's own ins[r] and
// checks every rank ends with root's bits.
func (w *world) broadcast(dt backend.DType, ins [][]float64, root int) {
	w.t.Helper()
	what := fmt.Sprintf("broadcast of %s from rank %d on %d ranks", describe(dt, len(ins[0])), root, w.size())
	bufs := make([]buf, w.size())
	for r := range bufs {
		bufs[r] = w.filled(r, dt, ins[r])
	}
	w.each(what, func(r int) error { return w.comm(r).Broadcast(context.Background(), bufs[r].Buffer, root) })
	raws := make([][]byte, w.size())
	for r, b := range bufs {
		var got []float64
		got, raws[r] = w.get(what, b)
		if i := firstDiff(got, ins[root]); i >= 0 {
			w.t.Fatalf("%s: rank %d's element %d = %v, want root's %v", what, r, i, got[i], ins[root][i])
		}
	}
	w.sameBits(what, raws)
}

// firstDiff is the first index where got and want differ, or -1.
func firstDiff(got, want []float64) int {
	for i := range want {
		if got[i] != want[i] {
			return i
		}
	}
	return -1
}

// refused checks that every rank refuses op on dt, in an all-reduce and a
// reduce-scatter, with a plain error, and that the Comm stays healthy.
func (w *world) refused(rng *rand.Rand, dt backend.DType, op comm.Op) {
	w.t.Helper()
	size := w.size()
	ins := w.inputs(rng, dt, size)
	bufs := make([]buf, size)
	dst := make([]buf, size)
	for r := range size {
		bufs[r] = w.filled(r, dt, ins[r])
		dst[r] = w.alloc(r, dt, 1)
	}
	for _, kind := range []comm.Kind{comm.KindAllReduce, comm.KindReduceScatter} {
		errs := OnEveryRank(size, func(r int) error {
			if kind == comm.KindAllReduce {
				return w.comm(r).AllReduce(context.Background(), bufs[r].Buffer, op)
			}
			return w.comm(r).ReduceScatter(context.Background(), dst[r].Buffer, bufs[r].Buffer, op)
		})
		for r, err := range errs {
			var ab *comm.AbortedError
			var te *comm.TimeoutError
			var pl *comm.PeerLostError
			switch {
			case err == nil:
				w.t.Fatalf("rank %d: %s(%s) of %s succeeded; Options.Refuses says it is refused", r, kind, op, dt)
			case errors.As(err, &ab) || errors.As(err, &te) || errors.As(err, &pl):
				w.t.Fatalf("rank %d: %s(%s) of %s: %v; want a plain refusal that leaves the Comm usable", r, kind, op, dt, err)
			}
		}
	}
	w.healthy(fmt.Sprintf("refusing %s of %s", op, dt))
}

// nanMax checks that Max propagates a NaN from any rank (or, where
// Options.MaxIgnoresNaN, at least returns a value).
func (w *world) nanMax(rng *rand.Rand) {
	w.t.Helper()
	size := w.size()
	for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16} {
		if w.o.Refuses(dt, comm.Max) {
			continue
		}
		ins := w.inputs(rng, dt, 5)
		ins[size-1][0] = math.NaN() // the last rank's
		ins[0][1] = math.NaN()      // rank 0's
		ins[0][2], ins[size-1][2] = math.NaN(), math.NaN()
		w.allReduce(dt, comm.Max, ins)
	}
}

// empty checks that every collective on zero elements succeeds and
// touches nothing.
func (w *world) empty() {
	w.t.Helper()
	size := w.size()
	type bufs struct{ a, b buf }
	bs := make([]bufs, size)
	for r := range bs {
		bs[r] = bufs{w.alloc(r, backend.F32, 0), w.alloc(r, backend.F32, 0)}
	}
	w.each("collectives of zero elements", func(r int) error {
		c, a, b, ctx := w.comm(r), bs[r].a.Buffer, bs[r].b.Buffer, context.Background()
		return inOrder(
			func() error { return c.AllReduce(ctx, a, comm.Sum) },
			func() error { return c.ReduceScatter(ctx, a, b, comm.Sum) },
			func() error { return c.AllGather(ctx, a, b) },
			func() error { return c.Broadcast(ctx, a, size-1) },
		)
	})
	for _, b := range bs {
		w.get("collectives of zero elements", b.a)
		w.get("collectives of zero elements", b.b)
	}
}

// inOrder runs calls one after another up to the first error, which it
// returns.
func inOrder(calls ...func() error) error {
	for _, call := range calls {
		if err := call(); err != nil {
			return err
		}
	}
	return nil
}
