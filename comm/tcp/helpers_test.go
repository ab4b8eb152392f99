package tcp

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
)

// rankEnv is one in-process rank: its own backend, store client and Comm,
// connected to the others over loopback exactly as separate processes are.
type rankEnv struct {
	be    *cpu.Backend
	store comm.Store
	c     *Comm
}

func newWorldBackend() *cpu.Backend { return cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1}) }

// newWorld starts size ranks and closes them when the test ends.
func newWorld(tb testing.TB, size int, mod func(*Options)) []*rankEnv {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	envs := make([]*rankEnv, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := range size {
		wg.Go(func() {
			ctx := context.Background()
			ro := comm.RendezvousOptions{Rank: r, Size: size, Addr: "127.0.0.1", Port: port, Timeout: 20 * time.Second}
			if r == 0 {
				ro.Listener = ln
			}
			st, err := comm.Rendezvous(ctx, ro)
			if err != nil {
				errs[r] = err
				return
			}
			be := newWorldBackend()
			o := Options{Rank: r, Size: size, Timeout: 20 * time.Second}
			if mod != nil {
				mod(&o)
			}
			c, err := New(ctx, st, be, o)
			envs[r] = &rankEnv{be: be, store: st, c: c}
			errs[r] = err
		})
	}
	wg.Wait()
	tb.Cleanup(func() { closeWorld(envs) })
	for r, err := range errs {
		if err != nil {
			tb.Fatalf("rank %d: %v", r, err)
		}
	}
	return envs
}

// closeWorld closes every Comm concurrently (as separate processes would),
// then the stores, rank 0's last since it serves them.
func closeWorld(envs []*rankEnv) {
	var wg sync.WaitGroup
	for _, e := range envs {
		if e != nil && e.c != nil {
			wg.Go(func() { e.c.Close() })
		}
	}
	wg.Wait()
	for r := len(envs) - 1; r >= 0; r-- {
		if envs[r] != nil && envs[r].store != nil {
			envs[r].store.Close()
		}
	}
}

// onEveryRank runs f for every rank concurrently and returns the errors by
// rank.
func onEveryRank(envs []*rankEnv, f func(r int, e *rankEnv) error) []error {
	errs := make([]error, len(envs))
	var wg sync.WaitGroup
	for r, e := range envs {
		wg.Go(func() { errs[r] = f(r, e) })
	}
	wg.Wait()
	return errs
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

func rawBytes(tb testing.TB, be backend.Backend, b backend.Buffer) []byte {
	tb.Helper()
	out := make([]byte, b.Bytes())
	if err := be.Download(out, b); err != nil {
		tb.Fatal(err)
	}
	return out
}

// exactInputs returns n values k/64 with |k| ≤ kmax, seeded by rank: exact
// in bf16 (kmax ≤ 255) or fp16 (kmax ≤ 2047), and summing exactly in fp32
// over a few ranks, so a reduction's only rounding is the final one.
func exactInputs(rank, n, kmax int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(rank)+1, 7))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.IntN(2*kmax+1)-kmax) / 64
	}
	return v
}

// randomInputs returns n values of mixed sign and magnitude.
func randomInputs(rank, n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(rank)+11, 3))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * float64(int(1)<<rng.IntN(8)))
	}
	return v
}
