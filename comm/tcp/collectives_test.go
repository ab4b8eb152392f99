package tcp

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// round16 rounds an fp32 value to dt once, to nearest even, and widens it
// back: the value a 16-bit buffer holds.
func round16(x float32, dt backend.DType) float32 {
	switch dt {
	case backend.BF16:
		return backend.F32FromBF16(backend.BF16FromF32(x))
	case backend.F16:
		return backend.F32FromF16(backend.F16FromF32(x))
	}
	return x
}

// expectReduced checks got (element i of the reduction of ins over ranks)
// against float64 math. fp32 results may differ from the exact value by the
// rounding of an (N−1)-term fp32 sum, bounded by (N−1)·2⁻²⁴·Σ|x| (Avg: that
// over N, plus the product's rounding). 16-bit results come from exact
// inputs whose fp32 sum is exact, so they must equal the exact result
// rounded once; Avg is, by contract, fl32(sum·fl32(1/N)) rounded once.
func expectReduced(t *testing.T, what string, got []float32, ins [][]float32, dt backend.DType, op comm.Op) {
	t.Helper()
	n := len(ins)
	const u = 1.0 / (1 << 24)
	bad := 0
	for i := range got {
		var sum, abs float64
		mx := float32(math.Inf(-1))
		for _, in := range ins {
			sum += float64(in[i])
			abs += math.Abs(float64(in[i]))
			mx = max(mx, in[i])
		}
		var ok bool
		var want float64
		switch {
		case op == comm.Max:
			want = float64(mx)
			ok = got[i] == mx
		case dt == backend.F32 && op == comm.Sum:
			want = sum
			ok = math.Abs(float64(got[i])-sum) <= float64(n-1)*u*abs
		case dt == backend.F32 && op == comm.Avg:
			want = sum / float64(n)
			ok = math.Abs(float64(got[i])-want) <= (float64(n-1)*u*abs+2*u*math.Abs(sum))/float64(n)+1e-45
		case op == comm.Sum:
			if float64(float32(sum)) != sum {
				t.Fatalf("test inputs do not sum exactly in fp32 at %d", i)
			}
			want = float64(round16(float32(sum), dt))
			ok = float64(got[i]) == want
		default: // 16-bit Avg
			want = float64(round16(float32(sum)*(1/float32(n)), dt))
			ok = float64(got[i]) == want
		}
		if !ok {
			if bad < 5 {
				t.Errorf("%s: element %d = %v, want %v (inputs %v)", what, i, got[i], want, column(ins, i))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d of %d elements wrong", what, bad, len(got))
	}
}

func column(ins [][]float32, i int) []float32 {
	c := make([]float32, len(ins))
	for r := range ins {
		c[r] = ins[r][i]
	}
	return c
}

// inputsFor gives each rank n values of dt: random for fp32, exact
// multiples of 1/64 for the 16-bit types.
func inputsFor(dt backend.DType, size, n int) [][]float32 {
	ins := make([][]float32, size)
	for r := range ins {
		switch dt {
		case backend.BF16:
			ins[r] = exactInputs(r, n, 255)
		case backend.F16:
			ins[r] = exactInputs(r, n, 2047)
		default:
			ins[r] = randomInputs(r, n)
		}
	}
	return ins
}

// sameBitsEverywhere fails unless every rank's result has rank 0's bytes.
func sameBitsEverywhere(t *testing.T, what string, res [][]byte) {
	t.Helper()
	for r := 1; r < len(res); r++ {
		if !bytes.Equal(res[r], res[0]) {
			t.Fatalf("%s: rank %d's result differs from rank 0's bit pattern", what, r)
		}
	}
}

var worlds = []struct {
	size, seg int
}{
	{1, 0}, {2, 0}, {3, 0}, {4, 0},
	{3, 1000}, // many segments, chunk edges inside segments (1000 is not a multiple of 16)
}

func worldName(size, seg int) string {
	if seg == 0 {
		return fmt.Sprintf("%dranks", size)
	}
	return fmt.Sprintf("%dranks_seg%d", size, seg)
}

func withSegment(seg int) func(*Options) {
	return func(o *Options) { o.SegmentBytes = seg }
}

func TestAllReduce(t *testing.T) {
	ctx := context.Background()
	for _, w := range worlds {
		t.Run(worldName(w.size, w.seg), func(t *testing.T) {
			envs := newWorld(t, w.size, withSegment(w.seg))
			for _, n := range []int{1, 7, 1000003} {
				if n > 100000 && w.seg != 0 {
					continue // segmentation is covered by the small cases
				}
				for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16} {
					for _, op := range []comm.Op{comm.Sum, comm.Avg, comm.Max} {
						if n > 100000 && op == comm.Max {
							continue
						}
						what := fmt.Sprintf("all-reduce %s %s n=%d", op, dt, n)
						ins := inputsFor(dt, w.size, n)
						res := make([][]byte, w.size)
						vals := make([][]float32, w.size)
						errs := onEveryRank(envs, func(r int, e *rankEnv) error {
							buf := allocWith(t, e.be, dt, ins[r])
							defer e.be.Free(buf)
							if err := e.c.AllReduce(ctx, buf, op); err != nil {
								return err
							}
							res[r], vals[r] = rawBytes(t, e.be, buf), readAll(t, e.be, buf)
							return nil
						})
						for r, err := range errs {
							if err != nil {
								t.Fatalf("%s: rank %d: %v", what, r, err)
							}
						}
						sameBitsEverywhere(t, what, res)
						expectReduced(t, what, vals[0], ins, dt, op)
					}
				}
			}
		})
	}
}

func TestAllReduceIsRepeatable(t *testing.T) {
	// The same inputs give the same bits call after call.
	envs := newWorld(t, 3, nil)
	const n = 10007
	ins := inputsFor(backend.F32, 3, n)
	var first [][]byte
	for round := range 3 {
		res := make([][]byte, 3)
		errs := onEveryRank(envs, func(r int, e *rankEnv) error {
			buf := allocWith(t, e.be, backend.F32, ins[r])
			defer e.be.Free(buf)
			if err := e.c.AllReduce(context.Background(), buf, comm.Sum); err != nil {
				return err
			}
			res[r] = rawBytes(t, e.be, buf)
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("round %d rank %d: %v", round, r, err)
			}
		}
		sameBitsEverywhere(t, "repeat", res)
		if first == nil {
			first = res
		} else if !bytes.Equal(first[0], res[0]) {
			t.Fatalf("round %d: result bits differ from round 0", round)
		}
	}
}

func TestAllReduceIntegers(t *testing.T) {
	envs := newWorld(t, 3, nil)
	const n = 1001
	for _, op := range []comm.Op{comm.Sum, comm.Max} {
		ins := make([][]int32, 3)
		for r := range ins {
			ins[r] = make([]int32, n)
			for i := range ins[r] {
				ins[r][i] = int32((i*7919+r*104729)%200001 - 100000)
			}
		}
		res := make([][]float32, 3)
		errs := onEveryRank(envs, func(r int, e *rankEnv) error {
			buf, err := e.be.Alloc(backend.Device, backend.Workspace, backend.I32, n)
			if err != nil {
				return err
			}
			defer e.be.Free(buf)
			if err := backend.WriteI32(e.be, buf, ins[r]); err != nil {
				return err
			}
			if err := e.c.AllReduce(context.Background(), buf, op); err != nil {
				return err
			}
			res[r] = readAll(t, e.be, buf)
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
		for i := range n {
			want := ins[0][i]
			for r := 1; r < 3; r++ {
				if op == comm.Sum {
					want += ins[r][i]
				} else {
					want = max(want, ins[r][i])
				}
			}
			for r := range 3 {
				if res[r][i] != float32(want) {
					t.Fatalf("%s: rank %d element %d = %v, want %d", op, r, i, res[r][i], want)
				}
			}
		}
	}
	// Avg has no integer meaning: refused before anything is sent.
	buf, _ := envs[0].be.Alloc(backend.Device, backend.Workspace, backend.I32, 4)
	if err := envs[0].c.AllReduce(context.Background(), buf, comm.Avg); err == nil {
		t.Fatal("avg of int32 accepted")
	}
}

func TestReduceScatter(t *testing.T) {
	ctx := context.Background()
	for _, w := range worlds {
		t.Run(worldName(w.size, w.seg), func(t *testing.T) {
			envs := newWorld(t, w.size, withSegment(w.seg))
			for _, m := range []int{1, 7, 250001} {
				if m > 100000 && w.seg != 0 {
					continue
				}
				for _, dt := range []backend.DType{backend.F32, backend.BF16} {
					for _, op := range []comm.Op{comm.Sum, comm.Avg, comm.Max} {
						what := fmt.Sprintf("reduce-scatter %s %s m=%d", op, dt, m)
						ins := inputsFor(dt, w.size, w.size*m)
						outs := make([][]float32, w.size)
						errs := onEveryRank(envs, func(r int, e *rankEnv) error {
							src := allocWith(t, e.be, dt, ins[r])
							defer e.be.Free(src)
							dst := allocWith(t, e.be, dt, make([]float32, m))
							defer e.be.Free(dst)
							if err := e.c.ReduceScatter(ctx, dst, src, op); err != nil {
								return err
							}
							outs[r] = readAll(t, e.be, dst)
							return nil
						})
						for r, err := range errs {
							if err != nil {
								t.Fatalf("%s: rank %d: %v", what, r, err)
							}
						}
						for r := range w.size {
							chunk := make([][]float32, w.size)
							for q := range w.size {
								chunk[q] = ins[q][r*m : (r+1)*m]
							}
							expectReduced(t, fmt.Sprintf("%s rank %d", what, r), outs[r], chunk, dt, op)
						}
					}
				}
			}
		})
	}
}

func TestAllGather(t *testing.T) {
	ctx := context.Background()
	for _, w := range worlds {
		t.Run(worldName(w.size, w.seg), func(t *testing.T) {
			envs := newWorld(t, w.size, withSegment(w.seg))
			for _, m := range []int{1, 7, 100003} {
				for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.I32, backend.U16} {
					what := fmt.Sprintf("all-gather %s m=%d", dt, m)
					ins := make([][]float32, w.size)
					var want []float32
					for r := range ins {
						ins[r] = make([]float32, m)
						for i := range ins[r] {
							ins[r][i] = float32((r*131 + i*17) % 256) // exact in every dtype
						}
						want = append(want, ins[r]...)
					}
					outs := make([][]float32, w.size)
					errs := onEveryRank(envs, func(r int, e *rankEnv) error {
						src := allocWith(t, e.be, dt, ins[r])
						defer e.be.Free(src)
						dst := allocWith(t, e.be, dt, make([]float32, w.size*m))
						defer e.be.Free(dst)
						if err := e.c.AllGather(ctx, dst, src); err != nil {
							return err
						}
						outs[r] = readAll(t, e.be, dst)
						return nil
					})
					for r, err := range errs {
						if err != nil {
							t.Fatalf("%s: rank %d: %v", what, r, err)
						}
					}
					for r := range w.size {
						for i := range want {
							if outs[r][i] != want[i] {
								t.Fatalf("%s: rank %d element %d = %v, want %v", what, r, i, outs[r][i], want[i])
							}
						}
					}
				}
			}
		})
	}
}

func TestBroadcast(t *testing.T) {
	ctx := context.Background()
	for _, w := range worlds {
		t.Run(worldName(w.size, w.seg), func(t *testing.T) {
			envs := newWorld(t, w.size, withSegment(w.seg))
			for root := range w.size {
				for _, n := range []int{1, 7, 300007} {
					for _, dt := range []backend.DType{backend.F32, backend.BF16} {
						what := fmt.Sprintf("broadcast %s n=%d root %d", dt, n, root)
						ins := inputsFor(dt, w.size, n)
						outs := make([][]byte, w.size)
						var want []byte
						errs := onEveryRank(envs, func(r int, e *rankEnv) error {
							buf := allocWith(t, e.be, dt, ins[r])
							defer e.be.Free(buf)
							if r == root {
								want = rawBytes(t, e.be, buf)
							}
							if err := e.c.Broadcast(ctx, buf, root); err != nil {
								return err
							}
							outs[r] = rawBytes(t, e.be, buf)
							return nil
						})
						for r, err := range errs {
							if err != nil {
								t.Fatalf("%s: rank %d: %v", what, r, err)
							}
						}
						for r := range w.size {
							if !bytes.Equal(outs[r], want) {
								t.Fatalf("%s: rank %d does not hold root's bytes", what, r)
							}
						}
					}
				}
			}
		})
	}
}

func TestCollectivesOnSlices(t *testing.T) {
	// Views into a larger allocation move only their own elements.
	envs := newWorld(t, 2, nil)
	errs := onEveryRank(envs, func(r int, e *rankEnv) error {
		whole := allocWith(t, e.be, backend.F32, []float32{-1, float32(r + 1), float32(10 * (r + 1)), -1})
		defer e.be.Free(whole)
		if err := e.c.AllReduce(context.Background(), whole.Slice(1, 2), comm.Sum); err != nil {
			return err
		}
		got := readAll(t, e.be, whole)
		if want := []float32{-1, 3, 30, -1}; fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("rank %d: %v, want %v", r, got, want)
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestBarrier(t *testing.T) {
	envs := newWorld(t, 4, nil)
	var entered [4]int
	for round := range 5 {
		counts := make(chan int, 4)
		errs := onEveryRank(envs, func(r int, e *rankEnv) error {
			entered[r] = round + 1 // each rank writes only its own slot
			if err := e.c.Barrier(context.Background()); err != nil {
				return err
			}
			n := 0
			for q := range entered {
				if entered[q] >= round+1 {
					n++
				}
			}
			counts <- n
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("round %d rank %d: %v", round, r, err)
			}
		}
		close(counts)
		for n := range counts {
			if n != 4 {
				t.Fatalf("round %d: a rank left the barrier when only %d had entered", round, n)
			}
		}
	}
}

func TestStatsCountCalls(t *testing.T) {
	envs := newWorld(t, 2, nil)
	errs := onEveryRank(envs, func(r int, e *rankEnv) error {
		buf := allocWith(t, e.be, backend.BF16, make([]float32, 1000))
		defer e.be.Free(buf)
		for range 3 {
			if err := e.c.AllReduce(context.Background(), buf, comm.Sum); err != nil {
				return err
			}
		}
		return e.c.Barrier(context.Background())
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := envs[1].c.Stats()
	if ar := s.Of(comm.KindAllReduce); ar.Calls != 3 || ar.Bytes != 3*2000 || ar.Seconds <= 0 {
		t.Fatalf("all-reduce stats %+v, want 3 calls of 2000 bytes", ar)
	}
	if b := s.Of(comm.KindBarrier); b.Calls != 1 || b.Bytes != 0 {
		t.Fatalf("barrier stats %+v", b)
	}
}
