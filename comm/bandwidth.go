package comm

import (
	"context"
	"fmt"
	"time"

	"github.com/gotrain/gotrain/backend"
)

// Bandwidth is the result of timing one collective at one message size.
// AlgBW is Bytes/Seconds and BusBW is AlgBW·BusFactor, both in bytes per
// second, so BusBW compares directly with a link's (or memcpy's) bandwidth.
type Bandwidth struct {
	Kind    Kind
	Bytes   int     // message size, as Stats counts it
	Iters   int     // timed calls
	Seconds float64 // mean wall time of one call on this rank
	AlgBW   float64
	BusBW   float64
}

func (b Bandwidth) String() string {
	return fmt.Sprintf("%s %d B: %.3f ms, algbw %.2f GB/s, busbw %.2f GB/s",
		b.Kind, b.Bytes, b.Seconds*1e3, b.AlgBW/1e9, b.BusBW/1e9)
}

// MeasureBusBandwidth times iters calls of collective k (all-reduce with
// Sum, reduce-scatter with Sum, all-gather or broadcast from rank 0) on a
// message of about bytes bytes of dt, after one untimed warm-up call and a
// barrier. Every rank must call it with the same arguments. The message is
// rounded down to a whole number of elements per rank. Buffers are
// allocated on be's Device pool (category Comm) and freed before returning.
func MeasureBusBandwidth(ctx context.Context, c Comm, be backend.Backend, k Kind, dt backend.DType, bytes, iters int) (Bandwidth, error) {
	n := c.Size()
	per := bytes / dt.Size() / n // elements per rank's chunk
	if per < 1 || iters < 1 {
		return Bandwidth{}, fmt.Errorf("measure %s: %d bytes of %s over %d ranks, %d iterations: nothing to time", k, bytes, dt, n, iters)
	}
	full, err := be.Alloc(backend.Device, backend.Comm, dt, per*n)
	if err != nil {
		return Bandwidth{}, fmt.Errorf("measure %s: %w", k, err)
	}
	defer be.Free(full)
	part, err := be.Alloc(backend.Device, backend.Comm, dt, per)
	if err != nil {
		return Bandwidth{}, fmt.Errorf("measure %s: %w", k, err)
	}
	defer be.Free(part)

	run := func() error {
		switch k {
		case KindAllReduce:
			return c.AllReduce(ctx, full, Sum)
		case KindReduceScatter:
			return c.ReduceScatter(ctx, part, full, Sum)
		case KindAllGather:
			return c.AllGather(ctx, full, part)
		case KindBroadcast:
			return c.Broadcast(ctx, full, 0)
		}
		return fmt.Errorf("measure %s: not a data collective", k)
	}
	if err := run(); err != nil {
		return Bandwidth{}, err
	}
	if err := c.Barrier(ctx); err != nil {
		return Bandwidth{}, err
	}
	start := time.Now()
	for range iters {
		if err := run(); err != nil {
			return Bandwidth{}, err
		}
	}
	if err := be.Sync(); err != nil {
		return Bandwidth{}, err
	}
	sec := time.Since(start).Seconds() / float64(iters)
	msg := full.Bytes()
	alg := float64(msg) / sec
	return Bandwidth{Kind: k, Bytes: msg, Iters: iters, Seconds: sec, AlgBW: alg, BusBW: alg * BusFactor(k, n)}, nil
}

// MeasureCopyBandwidth times iters same-dtype copies of bytes bytes between
// two Device buffers of be (memcpy on the CPU backend, a device-to-device
// copy on a GPU) and returns bytes copied per second: the yardstick a bus
// bandwidth is compared against.
func MeasureCopyBandwidth(be backend.Backend, bytes, iters int) (float64, error) {
	n := bytes / 4
	if n < 1 || iters < 1 {
		return 0, fmt.Errorf("measure copy: %d bytes, %d iterations: nothing to time", bytes, iters)
	}
	src, err := be.Alloc(backend.Device, backend.Workspace, backend.F32, n)
	if err != nil {
		return 0, fmt.Errorf("measure copy: %w", err)
	}
	defer be.Free(src)
	dst, err := be.Alloc(backend.Device, backend.Workspace, backend.F32, n)
	if err != nil {
		return 0, fmt.Errorf("measure copy: %w", err)
	}
	defer be.Free(dst)
	be.Copy(dst, src) // warm-up: fault the pages in
	if err := be.Sync(); err != nil {
		return 0, err
	}
	start := time.Now()
	for range iters {
		be.Copy(dst, src)
	}
	if err := be.Sync(); err != nil {
		return 0, err
	}
	return float64(4*n) * float64(iters) / time.Since(start).Seconds(), nil
}
