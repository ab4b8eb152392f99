package ncclcomm

import (
	"context"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/nccl"
)

// AllReduce implements comm.Comm: ncclAllReduce in place.
func (c *Comm) AllReduce(ctx context.Context, buf backend.Buffer, op comm.Op) error {
	dt, rop, err := reduction(comm.KindAllReduce, buf.DType(), op)
	if err != nil {
		return err
	}
	ps, err := c.place(buf)
	if err != nil {
		return err
	}
	p, n := ps[0].ptr, buf.Len()
	return c.copyOut(c.run(ctx, comm.KindAllReduce, int64(buf.Bytes()), c.issue(n, func(x *cuda.Ctx) error {
		if err := c.copyIn(x, ps...); err != nil {
			return err
		}
		return c.queueOut(x, c.nc.AllReduce(p, p, n, dt, rop, c.stream), ps...)
	})), ps...)
}

// ReduceScatter implements comm.Comm: ncclReduceScatter of src (Size·n
// elements) into dst (n elements).
func (c *Comm) ReduceScatter(ctx context.Context, dst, src backend.Buffer, op comm.Op) error {
	checkBuffer(dst)
	checkBuffer(src)
	if src.Len() != c.size*dst.Len() {
		panic("ncclcomm: reduce-scatter src length is not Size·dst length")
	}
	if src.DType() != dst.DType() {
		panic("ncclcomm: reduce-scatter dst and src dtypes differ")
	}
	dt, rop, err := reduction(comm.KindReduceScatter, src.DType(), op)
	if err != nil {
		return err
	}
	ps, err := c.place(dst, src)
	if err != nil {
		return err
	}
	dp, sp, n := ps[0].ptr, ps[1].ptr, dst.Len()
	return c.copyOut(c.run(ctx, comm.KindReduceScatter, int64(src.Bytes()), c.issue(n, func(x *cuda.Ctx) error {
		if err := c.copyIn(x, ps[1]); err != nil {
			return err
		}
		return c.queueOut(x, c.nc.ReduceScatter(sp, dp, n, dt, rop, c.stream), ps[0])
	})), ps[0])
}

// AllGather implements comm.Comm: ncclAllGather of src (n elements) into
// dst (Size·n elements).
func (c *Comm) AllGather(ctx context.Context, dst, src backend.Buffer) error {
	checkBuffer(dst)
	checkBuffer(src)
	if dst.Len() != c.size*src.Len() {
		panic("ncclcomm: all-gather dst length is not Size·src length")
	}
	if src.DType() != dst.DType() {
		panic("ncclcomm: all-gather dst and src dtypes differ")
	}
	dt, n, err := movement(comm.KindAllGather, src)
	if err != nil {
		return err
	}
	ps, err := c.place(dst, src)
	if err != nil {
		return err
	}
	dp, sp := ps[0].ptr, ps[1].ptr
	return c.copyOut(c.run(ctx, comm.KindAllGather, int64(dst.Bytes()), c.issue(n, func(x *cuda.Ctx) error {
		if err := c.copyIn(x, ps[1]); err != nil {
			return err
		}
		return c.queueOut(x, c.nc.AllGather(sp, dp, n, dt, c.stream), ps[0])
	})), ps[0])
}

// Broadcast implements comm.Comm: ncclBroadcast from root, in place.
func (c *Comm) Broadcast(ctx context.Context, buf backend.Buffer, root int) error {
	checkBuffer(buf)
	if root < 0 || root >= c.size {
		panic("ncclcomm: broadcast root out of range")
	}
	dt, n, err := movement(comm.KindBroadcast, buf)
	if err != nil {
		return err
	}
	ps, err := c.place(buf)
	if err != nil {
		return err
	}
	p := ps[0].ptr
	return c.copyOut(c.run(ctx, comm.KindBroadcast, int64(buf.Bytes()), c.issue(n, func(x *cuda.Ctx) error {
		if err := c.copyIn(x, ps...); err != nil {
			return err
		}
		return c.queueOut(x, c.nc.Broadcast(p, p, n, dt, root, c.stream), ps...)
	})), ps...)
}

// Barrier implements comm.Comm: an all-reduce of the Comm's one-int32
// word, which every rank can only finish once all have started it.
func (c *Comm) Barrier(ctx context.Context) error {
	return c.run(ctx, comm.KindBarrier, 0, func(x *cuda.Ctx) error {
		// Zeroed each time, so repeated sums never overflow.
		if err := x.MemsetD8Async(c.word, 0, 4, c.stream); err != nil {
			return err
		}
		return c.nc.AllReduce(c.word, c.word, 1, nccl.Int32, nccl.Sum, c.stream)
	})
}

// issue is fn, or nil (nothing to queue) for an empty message: every rank
// has the same count, so all of them skip NCCL alike.
func (c *Comm) issue(count int, fn func(x *cuda.Ctx) error) func(x *cuda.Ctx) error {
	if count == 0 {
		return nil
	}
	return fn
}

// reduction maps a reduction's dtype and op to NCCL's, or says why it
// cannot run; every rank gets the same answer for the same arguments, so
// none is left waiting.
func reduction(kind comm.Kind, dt backend.DType, op comm.Op) (nccl.DataType, nccl.RedOp, error) {
	var rop nccl.RedOp
	switch op {
	case comm.Sum:
		rop = nccl.Sum
	case comm.Max:
		rop = nccl.Max
	case comm.Avg:
		if !dt.IsFloat() {
			return 0, 0, fmt.Errorf("comm: %s: avg of %s is not defined; use sum", kind, dt)
		}
		rop = nccl.Avg
	default:
		return 0, 0, fmt.Errorf("comm: %s: unknown op %s", kind, op)
	}
	switch dt {
	case backend.F32:
		return nccl.Float32, rop, nil
	case backend.BF16:
		return nccl.Bfloat16, rop, nil
	case backend.F16:
		return nccl.Float16, rop, nil
	case backend.I32:
		return nccl.Int32, rop, nil
	}
	return 0, 0, fmt.Errorf("comm: %s: cannot reduce dtype %s with NCCL", kind, dt)
}

// movement is the NCCL type and element count that move b unchanged. NCCL
// has no 16-bit integer type, so U16 moves as twice as many bytes.
func movement(kind comm.Kind, b backend.Buffer) (nccl.DataType, int, error) {
	switch b.DType() {
	case backend.F32:
		return nccl.Float32, b.Len(), nil
	case backend.BF16:
		return nccl.Bfloat16, b.Len(), nil
	case backend.F16:
		return nccl.Float16, b.Len(), nil
	case backend.I32:
		return nccl.Int32, b.Len(), nil
	case backend.U16:
		return nccl.Uint8, 2 * b.Len(), nil
	}
	return 0, 0, fmt.Errorf("comm: %s: cannot move dtype %s with NCCL", kind, b.DType())
}
