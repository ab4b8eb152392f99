package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/compare"
	"github.com/gotrain/gotrain/backend/cpu"
	cudabe "github.com/gotrain/gotrain/backend/cuda"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/ncclcomm"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/internal/libsearch"
	"github.com/gotrain/gotrain/nccl"
)

// runSelftest is `gotrain doctor --selftest`: every op on the GPU against
// the CPU backend (the table of max errors), a timed bf16 GEMM, and the
// all-reduce bus bandwidth across the visible GPUs. Any op over its
// tolerance fails the command.
func runSelftest(c *cli.Context, threads int) error {
	w := c.App.Writer
	drv, err := cuda.Load(cuda.Options{})
	if err != nil {
		return fmt.Errorf("doctor --selftest needs a GPU: %w", err)
	}
	count, err := drv.DeviceCount()
	if err != nil {
		return fmt.Errorf("doctor --selftest: %w", err)
	}
	ord := c.Int("gpu")
	if ord < 0 || ord >= count {
		return fmt.Errorf("doctor --selftest: --gpu %d, but the driver shows %d GPU(s)", ord, count)
	}
	dev, err := drv.Open(ord)
	if err != nil {
		return fmt.Errorf("doctor --selftest: %w", err)
	}
	defer dev.Close()
	gi := dev.Info()
	fmt.Fprintf(w, "gpu %d: %s, sm_%d, %.1f GiB, driver %s\n", ord, gi.Name, gi.SM(), float64(gi.TotalMemoryBytes)/(1<<30), drv.VersionString())
	start := time.Now()
	be, err := newCUDABackend(dev, threads, false)
	if err != nil {
		return err
	}
	defer be.Close()
	img := be.Kernels().Image()
	fmt.Fprintf(w, "kernels: %s for %s, %d bytes, ready in %s (cached: %v)\n", img.Kind, img.Arch, len(img.Data),
		time.Since(start).Round(time.Millisecond), img.Cached)

	failed := selftestOps(w, be, threads)
	if err := selftestGEMM(w, be, c.Int("gemm-size")); err != nil {
		return err
	}
	if err := selftestCollective(c.Context, w, drv, count, threads, c.Int("collective-mib")<<20); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("doctor --selftest: %d op result(s) differ from the CPU backend beyond tolerance (see the table)", failed)
	}
	fmt.Fprintln(w, "selftest passed")
	return nil
}

// selftestOps prints, per output tensor, the largest relative error in
// each storage mix over every test shape, and returns how many failed.
func selftestOps(w io.Writer, be *cudabe.Backend, threads int) int {
	impl, _ := blas.Default(threads)
	ref := cpu.New(cpu.Options{Gemm: impl, Threads: threads})
	mixes := compare.Mixes()
	type row struct {
		worst [4]float64
		bad   [4]bool
		errs  []string
	}
	rows := map[string]*row{}
	var order []string
	failed := 0
	for si, s := range compare.Shapes() {
		for mi, d := range mixes {
			res, err := compare.Run(be, ref, s, d, uint64(si+1))
			if err != nil {
				fmt.Fprintf(w, "op test %s/%s: %v\n", s, d.Name, err)
				failed++
				continue
			}
			for _, r := range res {
				rw := rows[r.Tensor]
				if rw == nil {
					rw = &row{}
					rows[r.Tensor] = rw
					order = append(order, r.Tensor)
				}
				rw.worst[mi] = max(rw.worst[mi], r.MaxErr)
				if !r.OK() {
					rw.bad[mi] = true
					failed++
					if r.Err != "" {
						rw.errs = append(rw.errs, fmt.Sprintf("%s/%s: %s", s, d.Name, r.Err))
					}
				}
			}
		}
	}
	fmt.Fprintf(w, "\nmax error relative to the CPU backend (|gpu-cpu| / (rms+|cpu|)), over shapes %s\n", shapeList())
	fmt.Fprintf(w, "%-32s", "op result")
	for _, d := range mixes {
		fmt.Fprintf(w, " %12s", d.Name)
	}
	fmt.Fprintln(w)
	for _, name := range order {
		rw := rows[name]
		fmt.Fprintf(w, "%-32s", name)
		for mi := range mixes {
			cell := fmt.Sprintf("%.1e", rw.worst[mi])
			if rw.bad[mi] {
				cell += " FAIL"
			}
			fmt.Fprintf(w, " %12s", cell)
		}
		fmt.Fprintln(w)
		for _, e := range rw.errs {
			fmt.Fprintf(w, "    %s\n", e)
		}
	}
	fmt.Fprintf(w, "tolerances: fp32 %.0e, bf16 %.1e, fp16 %.0e\n\n", compare.Tol(backend.F32), compare.Tol(backend.BF16),
		compare.Tol(backend.F16))
	return failed
}

func shapeList() string {
	var s []string
	for _, sh := range compare.Shapes() {
		s = append(s, sh.String())
	}
	return strings.Join(s, ", ")
}

// selftestGEMM times the bf16 matmul forward (cuBLAS) at n×n×n.
func selftestGEMM(w io.Writer, be *cudabe.Backend, n int) error {
	if n <= 0 {
		return nil
	}
	var bufs []backend.Buffer
	defer func() {
		for _, b := range bufs {
			be.Free(b)
		}
	}()
	alloc := func(k int) (backend.Buffer, error) {
		b, err := be.Alloc(backend.Device, backend.Workspace, backend.BF16, k)
		if err == nil {
			bufs = append(bufs, b)
		}
		return b, err
	}
	out, err := alloc(n * n)
	if err != nil {
		return fmt.Errorf("selftest GEMM %d: %w", n, err)
	}
	inp, err := alloc(n * n)
	if err != nil {
		return fmt.Errorf("selftest GEMM %d: %w", n, err)
	}
	wt, err := alloc(n * n)
	if err != nil {
		return fmt.Errorf("selftest GEMM %d: %w", n, err)
	}
	be.MatmulForward(out, inp, wt, backend.Buffer{}, n, n, n) // warm-up: cuBLAS picks its kernel
	if err := be.Sync(); err != nil {
		return err
	}
	iters := 0
	start := time.Now()
	for time.Since(start) < time.Second || iters < 3 {
		be.MatmulForward(out, inp, wt, backend.Buffer{}, n, n, n)
		if err := be.Sync(); err != nil {
			return err
		}
		iters++
	}
	sec := time.Since(start).Seconds() / float64(iters)
	fmt.Fprintf(w, "gemm         bf16 %d×%d×%d: %.2f ms, %.1f TFLOP/s\n", n, n, n, sec*1e3, 2*float64(n)*float64(n)*float64(n)/sec/1e12)
	return nil
}

// selftestCollective measures the NCCL all-reduce bus bandwidth across
// every visible GPU, one in-process rank per GPU.
func selftestCollective(ctx context.Context, w io.Writer, drv *cuda.Driver, count, threads, bytes int) error {
	if count < 2 || bytes <= 0 {
		fmt.Fprintf(w, "all-reduce   %d GPU visible: no collective to measure\n", count)
		return nil
	}
	lib, err := nccl.Load(nccl.LoadOptions{Search: libsearch.FromEnv(drv.Version())})
	if err != nil {
		fmt.Fprintf(w, "all-reduce   not measured: %v\n", firstLine(err.Error()))
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	results := make([]comm.Bandwidth, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	for r := 0; r < count; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			results[r], errs[r] = selftestRank(ctx, drv, lib, r, count, threads, bytes, port, ln)
		}(r)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("selftest all-reduce: %w", err)
	}
	sort.Slice(results, func(i, j int) bool { return results[i].BusBW < results[j].BusBW })
	b := results[0]
	fmt.Fprintf(w, "all-reduce   %d GPUs, bf16 %d MiB: %.2f ms, algbw %.1f GB/s, busbw %.1f GB/s (slowest rank)\n",
		count, b.Bytes>>20, b.Seconds*1e3, b.AlgBW/1e9, b.BusBW/1e9)
	return nil
}

func selftestRank(ctx context.Context, drv *cuda.Driver, lib *nccl.Library, r, size, threads, bytes, port int, ln net.Listener) (comm.Bandwidth, error) {
	dev, err := drv.Open(r)
	if err != nil {
		return comm.Bandwidth{}, err
	}
	defer dev.Close()
	be, err := newCUDABackend(dev, max(1, threads/size), false)
	if err != nil {
		return comm.Bandwidth{}, err
	}
	defer be.Close()
	o := comm.RendezvousOptions{Rank: r, Size: size, Addr: "127.0.0.1", Port: port, Timeout: time.Minute}
	if r == 0 {
		o.Listener = ln
	}
	st, err := comm.Rendezvous(ctx, o)
	if err != nil {
		return comm.Bandwidth{}, err
	}
	defer st.Close()
	cm, err := ncclcomm.New(ctx, ncclcomm.Options{Rank: r, Size: size, Store: st, Device: dev, Lib: lib,
		Timeout: time.Minute, ComputeStream: be.Stream()})
	if err != nil {
		return comm.Bandwidth{}, err
	}
	defer cm.Close()
	return comm.MeasureBusBandwidth(ctx, cm, be, comm.KindAllReduce, backend.BF16, bytes, 5)
}
