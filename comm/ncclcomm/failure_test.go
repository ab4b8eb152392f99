package ncclcomm

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
	"github.com/gotrain/gotrain/nccl"
)

// The conformance suite covers timeouts, aborts, cancellation, lost peers
// and disagreements; these are what only NCCL's communicator and the
// mapping of its results show.

// A peer whose NCCL communicator is gone without a word in the Store (its
// process died) makes the call fail with this rank's abort wrapping
// NCCL's report, after the bounded look at the Store.
func testPeerGoneWithoutReason(t *testing.T, w *world) {
	ranks := w.ranks(t, 2, nil)
	bufs := f32s(t, ranks, 4)
	// What a dying process leaves behind: its communicator gone, nothing
	// in the Store. (Marking it failed only lets Close skip the clean
	// shutdown.)
	dead := ranks[1].Comm.(*Comm)
	dead.fail(cause{rank: 1, err: errors.New("died")})
	if err := dead.nc.Abort(); err != nil {
		t.Fatal(err)
	}
	err := ranks[0].Comm.AllReduce(context.Background(), bufs[0], comm.Sum)
	var ab *comm.AbortedError
	if !errors.As(err, &ab) || ab.Rank != 0 {
		t.Fatalf("the call after the peer died: %v; want this rank's abort", err)
	}
	if !nccl.IsResult(err, nccl.RemoteError) || !strings.Contains(err.Error(), "no rank published") {
		t.Errorf("the call after the peer died: %v; want NCCL's remote error, unexplained", err)
	}
}

// An op NCCL does not know is refused alike on every rank without ending
// the Comm.
func testUnknownOpIsRefused(t *testing.T, w *world) {
	ranks := w.ranks(t, 2, nil)
	bufs := f32s(t, ranks, 4)
	commtest.MustOnEveryRank(t, 2, func(r int) error {
		err := ranks[r].Comm.AllReduce(context.Background(), bufs[r], comm.Op(9))
		var ab *comm.AbortedError
		if err == nil || errors.As(err, &ab) || !strings.Contains(err.Error(), "unknown op") {
			t.Errorf("rank %d: an unknown op gave %v; want a plain refusal", r, err)
		}
		return ranks[r].Comm.Barrier(context.Background())
	})
}

// The zero Buffer and dtypes that disagree between arguments are caller
// bugs: they panic with a fixed ncclcomm message before any NCCL call,
// leaving the Comm usable. (Lengths and roots are the suite's.)
func testCallerBugsPanic(t *testing.T, w *world) {
	ctx := context.Background()
	ranks := w.ranks(t, 2, nil)
	c := ranks[0].Comm
	mem := ranks[0].Backend
	f32, err := mem.Alloc(backend.Device, backend.Comm, backend.F32, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free(f32)
	bf16, err := mem.Alloc(backend.Device, backend.Comm, backend.BF16, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Free(bf16)
	for name, call := range map[string]func(){
		"zero buffer":    func() { c.Broadcast(ctx, backend.Buffer{}, 0) },
		"scatter dtypes": func() { c.ReduceScatter(ctx, bf16, f32, comm.Sum) },
		"gather dtypes":  func() { c.AllGather(ctx, f32, bf16.Slice(0, 4)) },
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
	commtest.MustOnEveryRank(t, 2, func(r int) error { return ranks[r].Comm.Barrier(ctx) })
}

// New refuses an NCCL older than 2.10.3 (no bf16, no avg), naming both
// versions, and Options that disagree with the Store.
func TestNewRefusals(t *testing.T) {
	w := newWorld(t, "MOCK_NCCL_VERSION=2708")
	st := commtest.Stores(t, 1, comm.RendezvousOptions{})[0]
	_, err := New(context.Background(), w.options(st, 0))
	if err == nil || !strings.Contains(err.Error(), "2.10.3") || !strings.Contains(err.Error(), "2.7.8") {
		t.Errorf("New on NCCL 2.7.8: %v; want a refusal naming 2.7.8 and 2.10.3", err)
	}
	o := w.options(st, 0)
	o.Size = 2
	if _, err := New(context.Background(), o); err == nil || !strings.Contains(err.Error(), "store") {
		t.Errorf("New with a size the store disagrees with: %v", err)
	}
	o = w.options(st, 0)
	o.Lib = nil
	if _, err := New(context.Background(), o); err == nil {
		t.Errorf("New without a library succeeded")
	}
}

// Host-pool buffers (the trainer's bookkeeping, offloaded partitions) are
// staged through device memory: results land in host memory as they would
// in device memory, alone or mixed with device buffers in one call.
func testHostBuffersAreStaged(t *testing.T, w *world) {
	ctx := context.Background()
	ranks := w.ranks(t, 2, nil)
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
	commtest.MustOnEveryRank(t, 2, func(r int) error {
		c := ranks[r].Comm
		b, raw := hostBuf(backend.F32, []float32{float32(r + 1), 10 * float32(r+1), -3})
		if err := c.AllReduce(ctx, b, comm.Sum); err != nil {
			return err
		}
		got[r] = raw
		src, _ := hostBuf(backend.F32, []float32{float32(100 * (r + 1)), float32(100*(r+1) + 1)})
		dst, draw := hostBuf(backend.F32, make([]float32, 4))
		if err := c.AllGather(ctx, dst, src); err != nil {
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
