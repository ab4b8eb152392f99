package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/trainer"
)

// `gotrain launch --nproc N doctor --comm`: the ranks' collectives checked
// and timed, as nccl-tests' all_reduce_perf and friends do, over the
// transport training uses (TCP between CPU ranks, NCCL between GPUs).
// Every result is compared exactly with what the ranks' inputs imply; any
// wrong element or timeout fails the command naming the rank.

// doctorCommFlags are doctor's flags for --comm.
func doctorCommFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "comm", Usage: "under gotrain launch (or srun, mpirun): run all-reduce, all-gather, reduce-scatter and broadcast across the ranks, check every result exactly and print algorithm and bus bandwidth per size (as nccl-tests)"},
		&cli.StringFlag{Name: "comm-sizes", Value: "4KiB,64KiB,1MiB,16MiB", Usage: "--comm: message sizes (comma-separated, e.g. 8B,1MiB,1GiB), as nccl-tests counts them (all-gather: the gathered buffer; reduce-scatter: the input)"},
		&cli.IntFlag{Name: "comm-iters", Value: 5, Usage: "--comm: timed calls per size, after one checked warm-up call"},
		&cli.DurationFlag{Name: "comm-timeout", Value: time.Minute, Usage: "--comm: deadline of the rendezvous and of every collective"},
		&cli.StringFlag{Name: "device", Value: "auto", Usage: "--comm: cpu (TCP), cuda (NCCL) or auto"},
	}
}

// doctorCommOptions are seams for tests: wrap, when set, stands between
// the checks and the Comm (a test corrupts one rank's results with it).
type doctorCommOptions struct {
	wrap func(comm.Comm, backend.Backend) comm.Comm
}

// doctorCommKinds are the collectives checked.
func doctorCommKinds() []comm.Kind {
	return []comm.Kind{comm.KindAllReduce, comm.KindAllGather, comm.KindReduceScatter, comm.KindBroadcast}
}

// runDoctorComm is doctor --comm on this rank.
func runDoctorComm(c *cli.Context, o doctorCommOptions) error {
	rk, distributed, err := launch.DetectRank(os.Getenv)
	if err != nil {
		return err
	}
	if !distributed {
		return fmt.Errorf("doctor --comm: not started as a rank; run it under the launcher, e.g. gotrain launch --nproc 2 doctor --comm (or srun, mpirun)")
	}
	sizes, err := parseCommSizes(c.String("comm-sizes"))
	if err != nil {
		return err
	}
	iters := c.Int("comm-iters")
	if iters < 1 {
		return fmt.Errorf("--comm-iters %d: want at least 1", iters)
	}
	device, _, err := resolveDevice(c.String("device"), rk.WorldSize)
	if err != nil {
		return err
	}
	threads := max(1, c.Int("threads"))
	var (
		be  backend.Backend
		gpu *gpuRank
	)
	if device == "cuda" {
		if gpu, err = openGPU(rk.LocalRank, threads, false); err != nil {
			return err
		}
		defer gpu.Close()
		be = gpu.be
	} else if be, _, err = newBackend(threads, nil); err != nil {
		return err
	}
	timeout := c.Duration("comm-timeout")
	fields := []trainer.Field{{Name: "command", Value: "doctor --comm"}, {Name: "comm-sizes", Value: c.String("comm-sizes")},
		{Name: "comm-iters", Value: strconv.Itoa(iters)}, {Name: "device", Value: device}}
	cm, err := connect(c.Context, rk, be, gpu, timeout, fields, c.App.ErrWriter)
	if err != nil {
		return fmt.Errorf("doctor --comm: rank %d: %w", rk.Rank, err)
	}
	defer cm.Close()
	var cc comm.Comm = cm
	if o.wrap != nil {
		cc = o.wrap(cm, be)
	}
	out := c.App.Writer
	if rk.Rank != 0 {
		out = io.Discard
	}
	transport := "tcp"
	if gpu != nil {
		transport = "nccl"
	}
	fmt.Fprintf(out, "# gotrain doctor --comm: %d ranks over %s, float32, sum; %d timed iterations per size after one checked call\n", rk.WorldSize, transport, iters)
	fmt.Fprintln(out, "# algbw = size / time; busbw = algbw × 2(n−1)/n (all-reduce), (n−1)/n (all-gather, reduce-scatter), 1 (broadcast),")
	fmt.Fprintln(out, "# as nccl-tests defines them (doc/PERFORMANCE.md); time is rank 0's mean per call")
	for _, k := range doctorCommKinds() {
		fmt.Fprintf(out, "#\n# %s\n# %12s %12s %12s %12s %12s %7s\n", k, "size (B)", "count", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong")
		for _, size := range sizes {
			r, err := doctorCollective(c.Context, cc, be, k, size, iters, timeout)
			if err != nil {
				return fmt.Errorf("doctor --comm: rank %d: %s of %s: %w", rk.Rank, k, metrics.HumanBytes(int64(size)), err)
			}
			// Every rank learns which ranks saw wrong results, so that all
			// of them stop here and rank 0 can name them.
			bad, err := commWrongRanks(c.Context, cc, be, r.wrong, timeout)
			if err != nil {
				return fmt.Errorf("doctor --comm: rank %d: exchanging the check of %s: %w", rk.Rank, k, err)
			}
			fmt.Fprintf(out, "  %12d %12d %12.1f %12.3f %12.3f %7d\n", r.bytes, r.count, r.seconds*1e6, r.algBW/1e9, r.busBW/1e9, r.totalWrong(bad))
			if len(bad) > 0 {
				if r.wrong > 0 {
					return fmt.Errorf("doctor --comm: rank %d: %s of %d bytes: %d wrong elements, the first %s", rk.Rank, k, r.bytes, r.wrong, r.first)
				}
				return fmt.Errorf("doctor --comm: %s of %d bytes gave wrong results on %s (see its message); rank %d's were right", k, r.bytes, rankList(bad), rk.Rank)
			}
		}
	}
	fmt.Fprintf(out, "# all results exact on all %d ranks\n", rk.WorldSize)
	return nil
}

// commResult is one collective at one size on this rank.
type commResult struct {
	bytes, count int
	seconds      float64
	algBW, busBW float64
	wrong        int    // wrong elements on this rank
	first        string // the first of them, described
}

func (r commResult) totalWrong(bad []int) int {
	if r.wrong > 0 {
		return r.wrong
	}
	return len(bad) // at least one element on each such rank
}

// parseCommSizes reads --comm-sizes.
func parseCommSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := parseByteSize(f)
		if err != nil || n > 1<<34 {
			return nil, fmt.Errorf("--comm-sizes %q: %q is not a size up to 16GiB, e.g. --comm-sizes 8B,1MiB,64MiB", s, f)
		}
		sizes = append(sizes, int(n))
	}
	return sizes, nil
}

// commValue is rank r's input element i: a small integer, so that sums over
// any number of ranks in any order are exact in float32.
func commValue(r, i int) float32 { return float32((i*7+r*13)%251 + r) }

// doctorCollective checks one call of k on a message of size bytes exactly,
// then times iters more.
func doctorCollective(ctx context.Context, c comm.Comm, be backend.Backend, k comm.Kind, size, iters int, timeout time.Duration) (commResult, error) {
	n, me := c.Size(), c.Rank()
	per := max(1, size/4/n) // elements of one rank's chunk
	full := per * n
	var r commResult
	r.bytes, r.count = 4*full, full
	if k == comm.KindAllReduce || k == comm.KindBroadcast {
		// nccl-tests' count for these is the whole buffer; keep the size asked for.
		full = max(1, size/4)
		r.bytes, r.count = 4*full, full
	}
	big, err := be.Alloc(backend.Device, backend.Comm, backend.F32, full)
	if err != nil {
		return r, err
	}
	defer be.Free(big)
	small, err := be.Alloc(backend.Device, backend.Comm, backend.F32, per)
	if err != nil {
		return r, err
	}
	defer be.Free(small)

	in := make([]float32, full)
	var want []float32
	var dst backend.Buffer
	switch k {
	case comm.KindAllReduce:
		want = make([]float32, full)
		for i := range in {
			in[i] = commValue(me, i)
			for q := range n {
				want[i] += commValue(q, i)
			}
		}
		dst = big
	case comm.KindAllGather:
		want = make([]float32, full)
		for i := range want {
			want[i] = commValue(i/per, i%per)
		}
		in = in[:per]
		for j := range in {
			in[j] = commValue(me, j)
		}
		dst = big
	case comm.KindReduceScatter:
		want = make([]float32, per)
		for i := range in {
			in[i] = commValue(me, i)
		}
		for j := range want {
			for q := range n {
				want[j] += commValue(q, me*per+j)
			}
		}
		dst = small
	case comm.KindBroadcast:
		want = make([]float32, full)
		for i := range in {
			want[i] = commValue(0, i)
			in[i] = -1 // what a non-root must overwrite
			if me == 0 {
				in[i] = want[i]
			}
		}
		dst = big
	}
	src := big
	if k == comm.KindAllGather {
		src = small
	}
	call := func() error {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		switch k {
		case comm.KindAllReduce:
			return c.AllReduce(cctx, big, comm.Sum)
		case comm.KindAllGather:
			return c.AllGather(cctx, big, small)
		case comm.KindReduceScatter:
			return c.ReduceScatter(cctx, small, big, comm.Sum)
		default:
			return c.Broadcast(cctx, big, 0)
		}
	}
	if err := backend.WriteF32(be, src, in); err != nil {
		return r, err
	}
	if err := call(); err != nil {
		return r, err
	}
	got, err := backend.ReadF32(be, dst)
	if err != nil {
		return r, err
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if r.wrong == 0 {
				r.first = fmt.Sprintf("element %d is %v, want %v", i, got[i], want[i])
			}
			r.wrong++
		}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	err = c.Barrier(cctx)
	cancel()
	if err != nil {
		return r, err
	}
	start := time.Now()
	for range iters {
		if err := call(); err != nil {
			return r, err
		}
	}
	if err := be.Sync(); err != nil {
		return r, err
	}
	r.seconds = time.Since(start).Seconds() / float64(iters)
	r.algBW = float64(r.bytes) / r.seconds
	r.busBW = r.algBW * comm.BusFactor(k, n)
	return r, nil
}

// commWrongRanks all-gathers every rank's count of wrong elements and
// returns the ranks that saw any.
func commWrongRanks(ctx context.Context, c comm.Comm, be backend.Backend, wrong int, timeout time.Duration) ([]int, error) {
	n := c.Size()
	all, err := be.Alloc(backend.Device, backend.Comm, backend.F32, n)
	if err != nil {
		return nil, err
	}
	defer be.Free(all)
	one, err := be.Alloc(backend.Device, backend.Comm, backend.F32, 1)
	if err != nil {
		return nil, err
	}
	defer be.Free(one)
	if err := backend.WriteF32(be, one, []float32{float32(min(wrong, 1<<20))}); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.AllGather(cctx, all, one); err != nil {
		return nil, err
	}
	got, err := backend.ReadF32(be, all)
	if err != nil {
		return nil, err
	}
	var bad []int
	for r, v := range got {
		if v != 0 {
			bad = append(bad, r)
		}
	}
	return bad, nil
}

// rankList is "rank 1" or "ranks 1, 3".
func rankList(rs []int) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.Itoa(r)
	}
	if len(rs) == 1 {
		return "rank " + s[0]
	}
	return "ranks " + strings.Join(s, ", ")
}
