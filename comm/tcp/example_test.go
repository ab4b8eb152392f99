package tcp_test

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
	"github.com/gotrain/gotrain/comm/tcp"
)

// A world of two ranks in one process, connected over loopback exactly as
// two processes are: every rank meets the others at the rendezvous store
// that rank 0 serves (MASTER_ADDR:MASTER_PORT), then builds its Comm on
// the store and its own backend. Every rank issues the same collectives in
// the same order; an all-reduce leaves the same sum on each.
func ExampleNew() {
	const world = 2
	ln, err := net.Listen("tcp", "127.0.0.1:0") // rank 0 serves the store here
	if err != nil {
		fmt.Println(err)
		return
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	stores := make([]comm.Store, world)
	errs := commtest.OnEveryRank(world, func(rank int) error {
		o := comm.RendezvousOptions{Rank: rank, Size: world, Addr: "127.0.0.1", Port: port}
		if rank == 0 {
			o.Listener = ln
		}
		var err error
		stores[rank], err = comm.Rendezvous(ctx, o)
		return err
	})
	defer func() { // rank 0's store last: it serves the others
		for r := world - 1; r >= 0; r-- {
			if stores[r] != nil {
				stores[r].Close()
			}
		}
	}()
	if err := commtest.FirstErr(errs); err != nil {
		fmt.Println(err)
		return
	}

	sums := make([][]float32, world)
	errs = commtest.OnEveryRank(world, func(rank int) error {
		be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
		c, err := tcp.New(ctx, stores[rank], be, tcp.Options{Rank: rank, Size: world})
		if err != nil {
			return err
		}
		defer c.Close() // waits for the peers' farewells
		buf, err := be.Alloc(backend.Device, backend.Grads, backend.F32, 3)
		if err != nil {
			return err
		}
		if err := backend.WriteF32(be, buf, []float32{float32(rank + 1), 10, 100 * float32(rank)}); err != nil {
			return err
		}
		if err := c.AllReduce(ctx, buf, comm.Sum); err != nil {
			return err
		}
		sums[rank], err = backend.ReadF32(be, buf)
		return err
	})
	if err := commtest.FirstErr(errs); err != nil {
		fmt.Println(err)
		return
	}
	for rank, s := range sums {
		fmt.Printf("rank %d: %v\n", rank, s)
	}
	// Output:
	// rank 0: [3 20 100]
	// rank 1: [3 20 100]
}
