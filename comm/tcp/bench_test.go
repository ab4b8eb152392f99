package tcp

import (
	"context"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

// benchCollective times b.N calls of kind on a message of bytes bytes of dt
// among size in-process ranks over loopback, and reports algorithm and bus
// bandwidth (nccl-tests' and DeepSpeed's definitions) in GB/s.
func benchCollective(b *testing.B, kind comm.Kind, size, bytes int, dt backend.DType) {
	ranks := newWorld(b, size, nil)
	per := bytes / dt.Size() / size
	full := make([]backend.Buffer, size)
	part := make([]backend.Buffer, size)
	for r, rk := range ranks {
		var err error
		if full[r], err = rk.Backend.Alloc(backend.Device, backend.Comm, dt, per*size); err != nil {
			b.Fatal(err)
		}
		if part[r], err = rk.Backend.Alloc(backend.Device, backend.Comm, dt, per); err != nil {
			b.Fatal(err)
		}
	}
	run := func(iters int) {
		commtest.MustOnEveryRank(b, size, func(r int) error {
			c, ctx := ranks[r].Comm, context.Background()
			for range iters {
				var err error
				switch kind {
				case comm.KindAllReduce:
					err = c.AllReduce(ctx, full[r], comm.Sum)
				case comm.KindAllGather:
					err = c.AllGather(ctx, full[r], part[r])
				case comm.KindReduceScatter:
					err = c.ReduceScatter(ctx, part[r], full[r], comm.Sum)
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	run(1) // staging buffers and receive buffers reach their size
	msg := full[0].Bytes()
	b.SetBytes(int64(msg))
	b.ResetTimer()
	start := time.Now()
	run(b.N)
	sec := time.Since(start).Seconds() / float64(b.N)
	b.StopTimer()
	alg := float64(msg) / sec
	b.ReportMetric(alg/1e9, "algbw_GB/s")
	b.ReportMetric(alg*comm.BusFactor(kind, size)/1e9, "busbw_GB/s")
}

const (
	mib1  = 1 << 20
	mib64 = 64 << 20
)

func BenchmarkAllReduce2Ranks1MiB(b *testing.B) {
	benchCollective(b, comm.KindAllReduce, 2, mib1, backend.F32)
}
func BenchmarkAllReduce2Ranks64MiB(b *testing.B) {
	benchCollective(b, comm.KindAllReduce, 2, mib64, backend.F32)
}
func BenchmarkAllReduce4Ranks1MiB(b *testing.B) {
	benchCollective(b, comm.KindAllReduce, 4, mib1, backend.F32)
}
func BenchmarkAllReduce4Ranks64MiB(b *testing.B) {
	benchCollective(b, comm.KindAllReduce, 4, mib64, backend.F32)
}
func BenchmarkAllReduce4Ranks64MiBBF16(b *testing.B) {
	benchCollective(b, comm.KindAllReduce, 4, mib64, backend.BF16)
}
func BenchmarkAllGather4Ranks64MiB(b *testing.B) {
	benchCollective(b, comm.KindAllGather, 4, mib64, backend.F32)
}
func BenchmarkReduceScatter4Ranks64MiB(b *testing.B) {
	benchCollective(b, comm.KindReduceScatter, 4, mib64, backend.F32)
}

// BenchmarkMemcpy64MiB is the yardstick for the bus bandwidths above: one
// core copying host memory.
func BenchmarkMemcpy64MiB(b *testing.B) {
	src, dst := make([]byte, mib64), make([]byte, mib64)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	b.SetBytes(mib64)
	b.ResetTimer()
	for b.Loop() {
		copy(dst, src)
	}
	b.ReportMetric(float64(mib64)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}

func TestMeasureBusBandwidth(t *testing.T) {
	ranks := newWorld(t, 2, nil)
	res := make([]comm.Bandwidth, 2)
	commtest.MustOnEveryRank(t, 2, func(r int) error {
		var err error
		res[r], err = comm.MeasureBusBandwidth(context.Background(), ranks[r].Comm, ranks[r].Backend, comm.KindAllReduce, backend.F32, 1<<16+3, 3)
		return err
	})
	for r, bw := range res {
		// 65539 bytes round down to 8192 fp32 per rank: 65536 bytes.
		if bw.Bytes != 1<<16 || bw.Iters != 3 || bw.Seconds <= 0 {
			t.Fatalf("rank %d: %+v", r, bw)
		}
		if bw.AlgBW != float64(bw.Bytes)/bw.Seconds || bw.BusBW != bw.AlgBW*comm.BusFactor(comm.KindAllReduce, 2) {
			t.Fatalf("rank %d: inconsistent bandwidths %+v", r, bw)
		}
	}
	// 3 timed calls, 1 warm-up, 1 barrier.
	if s := ranks[0].Comm.Stats(); s.Of(comm.KindAllReduce).Calls != 4 || s.Of(comm.KindBarrier).Calls != 1 {
		t.Fatalf("stats %+v", s)
	}
	copyBW, err := comm.MeasureCopyBandwidth(ranks[0].Backend, 1<<20, 2)
	if err != nil || copyBW <= 0 {
		t.Fatalf("copy bandwidth %v, %v", copyBW, err)
	}
}
