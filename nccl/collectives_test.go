package nccl

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

const eps32 = 1.0 / (1 << 23)

// TestMockWorld runs every wrapper against one world of mock GPUs and the
// mock NCCL (building them is most of a test's time); each part makes its
// own communicators.
func TestMockWorld(t *testing.T) {
	w := newWorld(t)
	for _, part := range []struct {
		name string
		fn   func(*testing.T, *world)
	}{
		{"LoadAndIDs", testLoadMockVersionAndIDs},
		{"AllReduce", testAllReduce},
		{"ReduceScatter", testReduceScatter},
		{"AllGather", testAllGather},
		{"Broadcast", testBroadcast},
		{"SendRecvInGroup", testSendRecvInGroup},
		{"GroupedCollectives", testGroupedCollectives},
		{"ArgumentChecks", testArgumentChecks},
		{"Abort", testAbort},
	} {
		t.Run(part.name, func(t *testing.T) { part.fn(t, w) })
	}
}

// reduceRef is the float64 reduction of ins[r][i] over ranks, and a bound on
// the error of a float32 or bf16 result: fp32 arithmetic over n ranks
// (n·eps·magnitude) plus, for bf16, half an ulp of the rounded result.
func reduceRef(ins [][]float64, op RedOp, dt DataType) (ref, tol []float64) {
	n, count := len(ins), len(ins[0])
	ref, tol = make([]float64, count), make([]float64, count)
	for i := 0; i < count; i++ {
		acc, mag := ins[0][i], math.Abs(ins[0][i])
		for r := 1; r < n; r++ {
			x := ins[r][i]
			switch op {
			case Sum, Avg:
				acc += x
				mag += math.Abs(x)
			case Prod:
				acc *= x
			case Max:
				acc = math.Max(acc, x)
			case Min:
				acc = math.Min(acc, x)
			}
		}
		switch op {
		case Avg:
			acc /= float64(n)
			mag /= float64(n)
		case Prod:
			mag = math.Abs(acc)
		case Max, Min:
			mag = 0 // a pick, exact
		}
		ref[i] = acc
		tol[i] = float64(n+1) * eps32 * mag
		if dt == Bfloat16 {
			tol[i] += math.Ldexp(math.Abs(acc)+tol[i], -8)
		}
		if dt == Int32 && op == Avg {
			ref[i] = math.Trunc(acc) // integer division
		}
	}
	return ref, tol
}

func checkClose(t *testing.T, what string, got, ref, tol []float64) {
	t.Helper()
	bad := 0
	for i := range ref {
		if math.Abs(got[i]-ref[i]) > tol[i] {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] = %.9g, want %.9g (±%.3g)", what, i, got[i], ref[i], tol[i])
			}
		}
	}
}

func testAllReduce(t *testing.T, w *world) {
	rng := rand.New(rand.NewPCG(1, 1))
	for n := 2; n <= maxRanks; n++ {
		cs := w.comms(t, n)
		for _, dt := range []DataType{Float32, Bfloat16, Float64, Int32} {
			for _, op := range []RedOp{Sum, Avg, Max, Min, Prod} {
				for _, inPlace := range []bool{false, true} {
					t.Run(fmt.Sprintf("ranks%d/%v/%v/inplace=%v", n, dt, op, inPlace), func(t *testing.T) {
						const count = 37
						ins := make([][]float64, n)
						sends, recvs := make([]buffer, n), make([]buffer, n)
						for r := range ins {
							ins[r] = randomVals(rng, count, dt)
							sends[r] = put(t, w.devs[r], ins[r], dt)
							recvs[r] = sends[r]
							if !inPlace {
								recvs[r] = put(t, w.devs[r], make([]float64, count), dt)
							}
						}
						w.mustEach(t, n, func(r int) error {
							return cs[r].AllReduce(sends[r].ptr, recvs[r].ptr, count, dt, op, w.streams[r])
						})
						ref, tol := reduceRef(ins, op, dt)
						for r := 0; r < n; r++ {
							w.sync(t, r)
							checkClose(t, fmt.Sprintf("rank %d", r), get(t, w.devs[r], recvs[r]), ref, tol)
						}
					})
				}
			}
		}
	}
}

func testReduceScatter(t *testing.T, w *world) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, n := range []int{3, 4} {
		cs := w.comms(t, n)
		for _, dt := range []DataType{Float32, Bfloat16} {
			for _, op := range []RedOp{Sum, Avg, Max} {
				for _, inPlace := range []bool{false, true} {
					t.Run(fmt.Sprintf("ranks%d/%v/%v/inplace=%v", n, dt, op, inPlace), func(t *testing.T) {
						const recvCount = 5
						ins := make([][]float64, n)
						sends, recvs := make([]buffer, n), make([]buffer, n)
						for r := range ins {
							ins[r] = randomVals(rng, recvCount*n, dt)
							sends[r] = put(t, w.devs[r], ins[r], dt)
							if inPlace {
								// rank r's block of its own send buffer
								recvs[r] = buffer{ptr: sends[r].ptr.Add(r * recvCount * dt.Size()), n: recvCount, dt: dt}
							} else {
								recvs[r] = put(t, w.devs[r], make([]float64, recvCount), dt)
							}
						}
						w.mustEach(t, n, func(r int) error {
							return cs[r].ReduceScatter(sends[r].ptr, recvs[r].ptr, recvCount, dt, op, w.streams[r])
						})
						ref, tol := reduceRef(ins, op, dt)
						for r := 0; r < n; r++ {
							w.sync(t, r)
							lo := r * recvCount
							checkClose(t, fmt.Sprintf("rank %d", r), get(t, w.devs[r], recvs[r]), ref[lo:lo+recvCount], tol[lo:lo+recvCount])
						}
					})
				}
			}
		}
	}
}

func testAllGather(t *testing.T, w *world) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{3, 4} {
		cs := w.comms(t, n)
		for _, dt := range []DataType{Float32, Bfloat16} {
			for _, inPlace := range []bool{false, true} {
				t.Run(fmt.Sprintf("ranks%d/%v/inplace=%v", n, dt, inPlace), func(t *testing.T) {
					const sendCount = 6
					var want []float64
					sends, recvs := make([]buffer, n), make([]buffer, n)
					for r := 0; r < n; r++ {
						in := randomVals(rng, sendCount, dt)
						want = append(want, in...)
						if inPlace {
							// the send block sits at rank r's place in recv
							full := randomVals(rng, sendCount*n, dt)
							copy(full[r*sendCount:], in)
							recvs[r] = put(t, w.devs[r], full, dt)
							sends[r] = buffer{ptr: recvs[r].ptr.Add(r * sendCount * dt.Size()), n: sendCount, dt: dt}
						} else {
							sends[r] = put(t, w.devs[r], in, dt)
							recvs[r] = put(t, w.devs[r], make([]float64, sendCount*n), dt)
						}
					}
					w.mustEach(t, n, func(r int) error {
						return cs[r].AllGather(sends[r].ptr, recvs[r].ptr, sendCount, dt, w.streams[r])
					})
					for r := 0; r < n; r++ {
						w.sync(t, r)
						checkClose(t, fmt.Sprintf("rank %d", r), get(t, w.devs[r], recvs[r]), want, make([]float64, len(want)))
					}
				})
			}
		}
	}
}

func testBroadcast(t *testing.T, w *world) {
	rng := rand.New(rand.NewPCG(4, 4))
	const n, count = 3, 11
	cs := w.comms(t, n)
	for _, dt := range []DataType{Float32, Bfloat16} {
		for root := 0; root < n; root++ {
			t.Run(fmt.Sprintf("%v/root%d", dt, root), func(t *testing.T) {
				want := randomVals(rng, count, dt)
				sends, recvs := make([]buffer, n), make([]buffer, n)
				for r := 0; r < n; r++ {
					if r == root {
						sends[r] = put(t, w.devs[r], want, dt)
						recvs[r] = sends[r] // in place on the root
					} else {
						recvs[r] = put(t, w.devs[r], randomVals(rng, count, dt), dt)
					}
				}
				w.mustEach(t, n, func(r int) error {
					return cs[r].Broadcast(sends[r].ptr, recvs[r].ptr, count, dt, root, w.streams[r])
				})
				for r := 0; r < n; r++ {
					w.sync(t, r)
					checkClose(t, fmt.Sprintf("rank %d", r), get(t, w.devs[r], recvs[r]), want, make([]float64, count))
				}
			})
		}
	}
}

// testSendRecvInGroup passes a message around a ring: every rank sends to
// the next and receives from the previous inside one group, the pattern
// that deadlocks without a group.
func testSendRecvInGroup(t *testing.T, w *world) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{2, 4} {
		cs := w.comms(t, n)
		for _, recvFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("ranks%d/recvfirst=%v", n, recvFirst), func(t *testing.T) {
				const count = 9
				msgs := make([][]float64, n)
				sends, recvs := make([]buffer, n), make([]buffer, n)
				for r := 0; r < n; r++ {
					msgs[r] = randomVals(rng, count, Float32)
					sends[r] = put(t, w.devs[r], msgs[r], Float32)
					recvs[r] = put(t, w.devs[r], make([]float64, count), Float32)
				}
				w.mustEach(t, n, func(r int) error {
					next, prev := (r+1)%n, (r+n-1)%n
					return w.lib.Group(func() error {
						if recvFirst {
							if err := cs[r].Recv(recvs[r].ptr, count, Float32, prev, w.streams[r]); err != nil {
								return err
							}
							return cs[r].Send(sends[r].ptr, count, Float32, next, w.streams[r])
						}
						if err := cs[r].Send(sends[r].ptr, count, Float32, next, w.streams[r]); err != nil {
							return err
						}
						return cs[r].Recv(recvs[r].ptr, count, Float32, prev, w.streams[r])
					})
				})
				for r := 0; r < n; r++ {
					w.sync(t, r)
					checkClose(t, fmt.Sprintf("rank %d", r), get(t, w.devs[r], recvs[r]), msgs[(r+n-1)%n], make([]float64, count))
				}
			})
		}
	}
}

// testGroupedCollectives: two all-reduces issued in one group both land.
func testGroupedCollectives(t *testing.T, w *world) {
	rng := rand.New(rand.NewPCG(6, 6))
	const n, count = 3, 8
	cs := w.comms(t, n)
	ins := [2][][]float64{make([][]float64, n), make([][]float64, n)}
	bufs := [2][]buffer{make([]buffer, n), make([]buffer, n)}
	for k := range ins {
		for r := 0; r < n; r++ {
			ins[k][r] = randomVals(rng, count, Float32)
			bufs[k][r] = put(t, w.devs[r], ins[k][r], Float32)
		}
	}
	w.mustEach(t, n, func(r int) error {
		return w.lib.Group(func() error {
			for k := range bufs {
				if err := cs[r].AllReduce(bufs[k][r].ptr, bufs[k][r].ptr, count, Float32, Sum, w.streams[r]); err != nil {
					return err
				}
			}
			return nil
		})
	})
	for k := range bufs {
		ref, tol := reduceRef(ins[k], Sum, Float32)
		for r := 0; r < n; r++ {
			w.sync(t, r)
			checkClose(t, fmt.Sprintf("reduce %d rank %d", k, r), get(t, w.devs[r], bufs[k][r]), ref, tol)
		}
	}
}
