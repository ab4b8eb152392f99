package tcp

import (
	"context"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

func newWorldBackend() *cpu.Backend { return cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1}) }

// newWorld starts size ranks connected over loopback exactly as separate
// processes are, each with its own CPU backend, and closes them when the
// test ends. mod, when not nil, adjusts every rank's Options.
func newWorld(tb testing.TB, size int, mod func(*Options)) []commtest.Rank {
	tb.Helper()
	return commtest.NewWorld(tb, size, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
		be := newWorldBackend()
		o := Options{Rank: r, Size: size, Timeout: 20 * time.Second}
		if mod != nil {
			mod(&o)
		}
		c, err := New(ctx, st, be, o)
		return c, be, err
	})
}

// closeAll closes comms concurrently, as separate processes would: each
// Close waits for its peers' farewells.
func closeAll(comms ...*Comm) {
	commtest.OnEveryRank(len(comms), func(r int) error { return comms[r].Close() })
}

func allocWith(tb testing.TB, be backend.Backend, dt backend.DType, vals []float32) backend.Buffer {
	tb.Helper()
	b, err := be.Alloc(backend.Device, backend.Grads, dt, len(vals))
	if err != nil {
		tb.Fatal(err)
	}
	if err := backend.WriteF32(be, b, vals); err != nil {
		tb.Fatal(err)
	}
	return b
}

func readAll(tb testing.TB, be backend.Backend, b backend.Buffer) []float32 {
	tb.Helper()
	v, err := backend.ReadF32(be, b)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
