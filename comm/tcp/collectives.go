package tcp

import (
	"context"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// AllReduce implements comm.Comm: ring reduce-scatter then ring all-gather,
// in fp32 for float dtypes (see the package documentation).
func (c *Comm) AllReduce(ctx context.Context, buf backend.Buffer, op comm.Op) (err error) {
	if buf.IsNil() {
		panic("tcp: all-reduce of the zero Buffer")
	}
	dt, n := buf.DType(), buf.Len()
	if err := checkReduction(comm.KindAllReduce, dt, op); err != nil {
		return err
	}
	cl, err := c.begin(ctx, comm.KindAllReduce, dt, op, n, 0, buf.Bytes())
	if err != nil {
		return err
	}
	defer func() { err = cl.end(err) }()
	if c.size == 1 || n == 0 {
		return nil // one rank: the sum, max and average of x is x
	}
	size := c.size
	bounds := func(i int) int { return i * n / size }
	// In place on the buffer's own memory when the CPU can address it: the
	// all-reduce overwrites buf anyway, so staging would only add two
	// copies of the message.
	direct := hostView(buf)
	raw, work, err := c.stageForReduction(cl, buf, direct)
	if err != nil {
		return err
	}
	wt := wireType(dt)
	if err := cl.ringReduceScatter(work, wt, bounds, op); err != nil {
		return err
	}
	c.finishChunk(raw, work, dt, op, bounds(c.rank), bounds(c.rank+1))
	if err := cl.ringAllGather(raw, dt.Size(), bounds); err != nil {
		return err
	}
	if err := cl.flush(); err != nil {
		return err
	}
	if direct != nil {
		return nil
	}
	return c.upload(cl, buf, raw)
}

// ReduceScatter implements comm.Comm with the ring reduce-scatter alone.
func (c *Comm) ReduceScatter(ctx context.Context, dst, src backend.Buffer, op comm.Op) (err error) {
	if dst.IsNil() || src.IsNil() {
		panic("tcp: reduce-scatter of the zero Buffer")
	}
	if src.Len() != c.size*dst.Len() {
		panic("tcp: reduce-scatter src length is not Size·dst length")
	}
	if src.DType() != dst.DType() {
		panic("tcp: reduce-scatter dst and src dtypes differ")
	}
	dt, m := src.DType(), dst.Len()
	if err := checkReduction(comm.KindReduceScatter, dt, op); err != nil {
		return err
	}
	cl, err := c.begin(ctx, comm.KindReduceScatter, dt, op, src.Len(), 0, src.Bytes())
	if err != nil {
		return err
	}
	defer func() { err = cl.end(err) }()
	if c.size == 1 || m == 0 {
		c.be.Copy(dst, src)
		return nil
	}
	bounds := func(i int) int { return i * m }
	// Staged: the ring accumulates in place, and src must stay intact.
	raw, work, err := c.stageForReduction(cl, src, nil)
	if err != nil {
		return err
	}
	if err := cl.ringReduceScatter(work, wireType(dt), bounds, op); err != nil {
		return err
	}
	lo, hi := bounds(c.rank), bounds(c.rank+1)
	c.finishChunk(raw, work, dt, op, lo, hi)
	if err := cl.flush(); err != nil {
		return err
	}
	return c.upload(cl, dst, raw[lo*dt.Size():hi*dt.Size()])
}

// AllGather implements comm.Comm with the ring all-gather.
func (c *Comm) AllGather(ctx context.Context, dst, src backend.Buffer) (err error) {
	if dst.IsNil() || src.IsNil() {
		panic("tcp: all-gather of the zero Buffer")
	}
	if dst.Len() != c.size*src.Len() {
		panic("tcp: all-gather dst length is not Size·src length")
	}
	if src.DType() != dst.DType() {
		panic("tcp: all-gather dst and src dtypes differ")
	}
	dt, m := src.DType(), src.Len()
	cl, err := c.begin(ctx, comm.KindAllGather, dt, 0, dst.Len(), 0, dst.Bytes())
	if err != nil {
		return err
	}
	defer func() { err = cl.end(err) }()
	if c.size == 1 || m == 0 {
		c.be.Copy(dst, src)
		return nil
	}
	esz := dt.Size()
	bounds := func(i int) int { return i * m }
	// Gathered straight into dst when the CPU can address it.
	raw := hostView(dst)
	direct := raw != nil
	if !direct {
		raw = c.staging.bytes(dst.Bytes())
	}
	if err := c.download(cl, raw[bounds(c.rank)*esz:bounds(c.rank+1)*esz], src); err != nil {
		return err
	}
	if err := cl.ringAllGather(raw, esz, bounds); err != nil {
		return err
	}
	if err := cl.flush(); err != nil {
		return err
	}
	if direct {
		return nil
	}
	return c.upload(cl, dst, raw)
}

// Broadcast implements comm.Comm with a ring pipeline from root.
func (c *Comm) Broadcast(ctx context.Context, buf backend.Buffer, root int) (err error) {
	if buf.IsNil() {
		panic("tcp: broadcast of the zero Buffer")
	}
	if root < 0 || root >= c.size {
		panic("tcp: broadcast root out of range")
	}
	dt := buf.DType()
	cl, err := c.begin(ctx, comm.KindBroadcast, dt, 0, buf.Len(), root, buf.Bytes())
	if err != nil {
		return err
	}
	defer func() { err = cl.end(err) }()
	if c.size == 1 || buf.Len() == 0 {
		return nil
	}
	raw := hostView(buf)
	direct := raw != nil
	if !direct {
		raw = c.staging.bytes(buf.Bytes())
		if c.rank == root {
			if err := c.download(cl, raw, buf); err != nil {
				return err
			}
		}
	}
	if err := cl.ringBroadcast(raw, dt.Size(), root); err != nil {
		return err
	}
	if err := cl.flush(); err != nil {
		return err
	}
	if c.rank == root || direct {
		return nil
	}
	return c.upload(cl, buf, raw)
}

// Barrier implements comm.Comm: every rank sends an empty frame to every
// other and waits for one from each, so it completes in one hop and a
// timeout names exactly the ranks that never arrived.
func (c *Comm) Barrier(ctx context.Context) (err error) {
	cl, err := c.begin(ctx, comm.KindBarrier, 0, 0, 0, 0, 0)
	if err != nil {
		return err
	}
	defer func() { err = cl.end(err) }()
	if c.size == 1 {
		return nil
	}
	for _, p := range c.peers {
		if p != nil {
			cl.send(p, nil)
		}
	}
	for i, p := range c.peers {
		if p == nil {
			continue
		}
		missing := func() []int {
			var m []int
			for _, q := range c.peers[i:] {
				if q != nil && len(q.frames) == 0 {
					m = append(m, q.rank)
				}
			}
			return m
		}
		in, err := cl.recv(p, 0, missing)
		if err != nil {
			return err
		}
		p.release(in)
	}
	return cl.flush()
}

// stageForReduction returns the bytes of buf the reduction reads and
// writes, raw (direct, the buffer's own memory, when not nil; else a
// download into staging), and the bytes it works on: raw itself, or its
// fp32 widening for 16-bit floats.
func (c *Comm) stageForReduction(cl *call, buf backend.Buffer, direct []byte) (raw, work []byte, err error) {
	raw = direct
	if raw == nil {
		raw = c.staging.bytes(buf.Bytes())
		if err := c.download(cl, raw, buf); err != nil {
			return nil, nil, err
		}
	}
	if !is16BitFloat(buf.DType()) {
		return raw, raw, nil
	}
	wide := c.staging.floats(buf.Len())
	widen(wide, raw, buf.DType())
	return raw, f32AsBytes(wide), nil
}

// finishChunk completes this rank's reduced chunk [lo, hi): Avg's 1/N, then
// the single rounding of a 16-bit result into raw.
func (c *Comm) finishChunk(raw, work []byte, dt backend.DType, op comm.Op, lo, hi int) {
	if op == comm.Avg {
		scale(asF32(work)[lo:hi], 1/float32(c.size))
	}
	if is16BitFloat(dt) {
		narrow(raw[2*lo:2*hi], asF32(work)[lo:hi], dt)
	}
}

// hostView is the memory under b when the CPU can address it directly (every
// buffer of the CPU backend, host-pool buffers of the CUDA backend), else
// nil: such buffers are sent from and received into in place, without
// staging copies.
func hostView(b backend.Buffer) []byte {
	m := b.Mem()
	if m == nil || m.Freed || m.Host == nil || b.Bytes() == 0 {
		return nil
	}
	return m.Host[b.ByteOff() : b.ByteOff()+b.Bytes() : b.ByteOff()+b.Bytes()]
}

// download and upload move a message between a Buffer and staging. A
// failure aborts the Comm, since the peers are already in the call and would
// otherwise wait for this rank until their deadline.
func (c *Comm) download(cl *call, dst []byte, src backend.Buffer) error {
	if err := c.be.Download(dst, src); err != nil {
		err = fmt.Errorf("comm: %s: read %s: %w", cl.want.kind, src, err)
		c.fail(cause{what: causeAborted, rank: c.rank, reporter: c.rank, err: err})
		return err
	}
	return nil
}

func (c *Comm) upload(cl *call, dst backend.Buffer, src []byte) error {
	if err := c.be.Upload(dst, src); err != nil {
		err = fmt.Errorf("comm: %s: write %s: %w", cl.want.kind, dst, err)
		c.fail(cause{what: causeAborted, rank: c.rank, reporter: c.rank, err: err})
		return err
	}
	return nil
}
