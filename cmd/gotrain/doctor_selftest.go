package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
// the CPU backend (the table of max errors), then the extended shapes of
// --shapes (long grouped attention, a large vocabulary: a row each), a
// timed bf16 GEMM on random data, and the all-reduce bus bandwidth across
// the visible GPUs. Any result over its tolerance fails the command.
func runSelftest(c *cli.Context, threads int) error {
	w := c.App.Writer
	size, err := compare.ParseSize(c.String("shapes"))
	if err != nil {
		return fmt.Errorf("doctor --shapes: %w", err)
	}
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

	impl, _ := blas.Default(threads)
	ref := cpu.New(cpu.Options{Gemm: impl, Threads: threads})
	failed := selftestOps(w, be, ref)
	failed += selftestLong(w, be, ref, size)
	if err := selftestGEMM(w, be, c.Int("gemm-size")); err != nil {
		return err
	}
	if err := selftestCollective(c.Context, w, drv, count, threads, c.Int("collective-mib")<<20); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("doctor --selftest: %d op result(s) differ from the CPU backend beyond tolerance (see the tables)", failed)
	}
	fmt.Fprintln(w, "selftest passed")
	return nil
}

// selftestOps prints, per output tensor, the largest relative error in
// each storage mix over every test shape, and returns how many failed.
func selftestOps(w io.Writer, be *cudabe.Backend, ref backend.Backend) int {
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

// selftestGEMM times the bf16 matmul forward (cuBLAS) at n×n×n on
// standard normal operands.
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
	// Random operands: a GEMM on zeros runs measurably faster (its
	// multipliers toggle no bits and draw less power) than on real data.
	for i, b := range []backend.Buffer{inp, wt} {
		if err := fillNormal(be, b, uint64(i+1)); err != nil {
			return fmt.Errorf("selftest GEMM %d: %w", n, err)
		}
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

// fillNormal writes standard normal values drawn from seed into x, a
// million at a time, so the host holds no copy of a large x.
func fillNormal(be backend.Backend, x backend.Buffer, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, uint64(x.Len())))
	buf := make([]float32, min(x.Len(), 1<<20))
	for off := 0; off < x.Len(); off += len(buf) {
		v := buf[:min(len(buf), x.Len()-off)]
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		if err := backend.WriteF32(be, x.Slice(off, len(v)), v); err != nil {
			return err
		}
	}
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

// doctorSelftestFlags are doctor's flags that size --selftest and --e2e.
func doctorSelftestFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "shapes", Value: "full", Usage: "--selftest, --e2e: full (attention at T ≥ 1024, a 151,936-id classifier, " +
			"the tiny models as named) or small (the same code paths at sizes the CPU emulation of a GPU runs in seconds, for tests)"},
	}
}

// longCase is one comparison at an extended shape: what it is, and how
// to run it in a dtype. plan says what the backend ran for that dtype,
// and an error when the shape misses the path it is there to reach.
type longCase struct {
	op, shape string
	plan      func(dt backend.DType) (string, error)
	run       func(dt backend.DType, seed uint64) ([]compare.Result, error)
}

// selftestLong compares attention at long sequences with grouped and
// multi-query heads, and the classifier at a large vocabulary, in fp32
// and bf16, prints a row per shape and dtype, and returns how many
// failed.
func selftestLong(w io.Writer, be *cudabe.Backend, ref backend.Backend, size compare.Size) int {
	var cases []longCase
	for _, s := range compare.AttentionShapes(size) {
		cases = append(cases, longCase{op: "attention", shape: s.String(),
			plan: func(dt backend.DType) (string, error) { return attentionPlanText(be, s, dt) },
			run: func(dt backend.DType, seed uint64) ([]compare.Result, error) {
				return compare.RunAttention(be, ref, s, dt, seed)
			}})
	}
	for _, s := range compare.ClassifierShapes(size) {
		cases = append(cases, longCase{op: "classifier", shape: s.String(),
			plan: func(backend.DType) (string, error) {
				return fmt.Sprintf("%d rows of %d ids (%d columns), one block a row", s.N, s.V, s.Vp), nil
			},
			run: func(dt backend.DType, seed uint64) ([]compare.Result, error) {
				return compare.RunClassifier(be, ref, s, dt, seed)
			}})
	}
	fmt.Fprintf(w, "extended shapes (--shapes %s) against the CPU backend: the largest error relative to the CPU as above, and "+
		"the worst element's error as a fraction of what it may differ by (at most 1 passes)\n", size)
	fmt.Fprintf(w, "%-10s %-21s %-5s %-62s %-34s %6s\n", "op", "shape", "dtype", "what ran", "max error (tensor)", "worst")
	failed := 0
	for ci, lc := range cases {
		for _, d := range compare.LongDTypes() {
			failed += selftestLongRow(w, lc, d, uint64(ci+1))
		}
	}
	fmt.Fprintf(w, "attention: an element may differ by the fp32 tolerance of its magnitude plus, per term it sums, "+
		"(4·√n + HD)·2^-24 of what the term is computed from (n terms) and in bf16 2^-8 of the term (p and dS rounded for "+
		"the products) and one ulp of itself; classifier: %.0e (fp32), %.1e (bf16) as above\n\n",
		compare.Tol(backend.F32), compare.Tol(backend.BF16))
	return failed
}

// selftestLongRow runs one case in one dtype, prints its row and any
// failing tensors beneath, and returns the count of failures.
func selftestLongRow(w io.Writer, lc longCase, d compare.DTypes, seed uint64) int {
	what, perr := lc.plan(d.Act)
	res, err := lc.run(d.Act, seed)
	failed := 0
	var notes []string
	if perr != nil {
		failed++
		notes = append(notes, perr.Error())
	}
	if err != nil {
		failed++
		notes = append(notes, err.Error())
	}
	var worst compare.Result
	for _, r := range res {
		worst.Worst = max(worst.Worst, r.Worst)
		if r.MaxErr >= worst.MaxErr {
			worst.MaxErr, worst.Tensor = r.MaxErr, r.Tensor
		}
		switch {
		case r.Err != "":
			failed++
			notes = append(notes, fmt.Sprintf("%s: %s", r.Tensor, r.Err))
		case !r.OK():
			failed++
			notes = append(notes, fmt.Sprintf("%s: max error %.2e, %d of %d elements beyond what they may differ by",
				r.Tensor, r.MaxErr, r.Bad, r.N))
		}
	}
	verdict := "ok"
	if failed > 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%-10s %-21s %-5s %-62s %-34s %6.2f %s\n", lc.op, lc.shape, d.Name, what,
		fmt.Sprintf("%.1e (%s)", worst.MaxErr, worst.Tensor), worst.Worst, verdict)
	for _, n := range notes {
		fmt.Fprintf(w, "    %s\n", n)
	}
	return failed
}

// attentionPlanText says how the CUDA backend runs attention at s in dt:
// the head grouping, the query chunks and where dK and dV accumulate. A
// plan of one chunk is an error: the shape is there to test several.
func attentionPlanText(be *cudabe.Backend, s compare.AttentionShape, dt backend.DType) (string, error) {
	pl := be.AttentionPlan(s.B, s.T, s.NH, s.KV, s.HD, dt)
	chunks := fmt.Sprintf("%d chunks of %d rows", pl.Chunks, pl.Rows)
	if last := s.T - (pl.Chunks-1)*pl.Rows; last != pl.Rows {
		chunks += fmt.Sprintf(" (last %d)", last)
	}
	acc := "dK,dV summed in dqkv"
	if pl.FP32Accumulators {
		acc = "dK,dV in fp32 scratch"
	}
	what := fmt.Sprintf("%s, %s, %s", s.Groups(), chunks, acc)
	if pl.Chunks < 2 {
		return what, fmt.Errorf("the CUDA backend runs T = %d in one query chunk, so the multi-chunk path went untested", s.T)
	}
	return what, nil
}
