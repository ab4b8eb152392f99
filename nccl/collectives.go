package nccl

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include "gt_dl.h"
#include "gt_nccl.h"
*/
import "C"

import (
	"errors"

	"github.com/gotrain/gotrain/cuda"
)

// handle is the live communicator, or ErrClosed.
func (c *Comm) handle() (C.uintptr_t, error) {
	h := c.h.Load()
	if h == 0 {
		return 0, ErrClosed
	}
	return C.uintptr_t(h), nil
}

// AllReduce reduces count elements of send over all ranks with op and
// writes the result to every rank's recv (ncclAllReduce). send == recv is
// in place.
func (c *Comm) AllReduce(send, recv cuda.DevicePtr, count int, dt DataType, op RedOp, s cuda.Stream) error {
	const name = "ncclAllReduce"
	if err := errors.Join(c.checkType(name, dt), c.checkOp(name, op), checkBuffers(name, count, send, recv)); err != nil {
		return err
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	var buf errBuf
	p, n := buf.ptr()
	rc := C.gt_nccl_all_reduce(&c.lib.fns, C.uint64_t(send), C.uint64_t(recv), C.size_t(count), C.gt_ncclDataType_t(dt),
		C.gt_ncclRedOp_t(op), h, C.uintptr_t(s), p, n)
	return c.lib.err(rc, &buf, "%s (%d %v, %v, rank %d of %d)", name, count, dt, op, c.rank, c.ranks)
}

// ReduceScatter reduces send (recvCount·Size() elements on every rank)
// with op and leaves block r of the result, recvCount elements, in rank
// r's recv (ncclReduceScatter). recv == send + Rank()·recvCount elements
// is in place.
func (c *Comm) ReduceScatter(send, recv cuda.DevicePtr, recvCount int, dt DataType, op RedOp, s cuda.Stream) error {
	const name = "ncclReduceScatter"
	if err := errors.Join(c.checkType(name, dt), c.checkOp(name, op), checkBuffers(name, recvCount, send, recv)); err != nil {
		return err
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	var buf errBuf
	p, n := buf.ptr()
	rc := C.gt_nccl_reduce_scatter(&c.lib.fns, C.uint64_t(send), C.uint64_t(recv), C.size_t(recvCount),
		C.gt_ncclDataType_t(dt), C.gt_ncclRedOp_t(op), h, C.uintptr_t(s), p, n)
	return c.lib.err(rc, &buf, "%s (%d %v per rank, %v, rank %d of %d)", name, recvCount, dt, op, c.rank, c.ranks)
}

// AllGather concatenates every rank's sendCount elements of send, in rank
// order, into every rank's recv (sendCount·Size() elements)
// (ncclAllGather). send == recv + Rank()·sendCount elements is in place.
func (c *Comm) AllGather(send, recv cuda.DevicePtr, sendCount int, dt DataType, s cuda.Stream) error {
	const name = "ncclAllGather"
	if err := errors.Join(c.checkType(name, dt), checkBuffers(name, sendCount, send, recv)); err != nil {
		return err
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	var buf errBuf
	p, n := buf.ptr()
	rc := C.gt_nccl_all_gather(&c.lib.fns, C.uint64_t(send), C.uint64_t(recv), C.size_t(sendCount),
		C.gt_ncclDataType_t(dt), h, C.uintptr_t(s), p, n)
	return c.lib.err(rc, &buf, "%s (%d %v per rank, rank %d of %d)", name, sendCount, dt, c.rank, c.ranks)
}

// Broadcast copies root's count elements of send into every rank's recv
// (ncclBroadcast); send is only read on root, where send == recv is in
// place.
func (c *Comm) Broadcast(send, recv cuda.DevicePtr, count int, dt DataType, root int, s cuda.Stream) error {
	const name = "ncclBroadcast"
	bufs := []cuda.DevicePtr{recv}
	if c.rank == root {
		bufs = append(bufs, send)
	}
	if err := errors.Join(c.checkType(name, dt), c.checkPeer(name, "root", root), checkBuffers(name, count, bufs...)); err != nil {
		return err
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	var buf errBuf
	p, n := buf.ptr()
	rc := C.gt_nccl_broadcast(&c.lib.fns, C.uint64_t(send), C.uint64_t(recv), C.size_t(count), C.gt_ncclDataType_t(dt),
		C.int(root), h, C.uintptr_t(s), p, n)
	return c.lib.err(rc, &buf, "%s (%d %v from root %d, rank %d of %d)", name, count, dt, root, c.rank, c.ranks)
}

// Send sends count elements of send to rank peer, which must post the
// matching Recv (ncclSend, NCCL 2.7.3 and later). A rank that both sends
// and receives puts the pair inside one Group, or the two ranks can wait
// for each other.
func (c *Comm) Send(send cuda.DevicePtr, count int, dt DataType, peer int, s cuda.Stream) error {
	const name = "ncclSend"
	if err := c.lib.needs(c.lib.fns.send, name, "2.7.3"); err != nil {
		return err
	}
	if err := errors.Join(c.checkType(name, dt), c.checkPeer(name, "peer", peer), checkBuffers(name, count, send)); err != nil {
		return err
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	var buf errBuf
	p, n := buf.ptr()
	rc := C.gt_nccl_send(&c.lib.fns, C.uint64_t(send), C.size_t(count), C.gt_ncclDataType_t(dt), C.int(peer), h,
		C.uintptr_t(s), p, n)
	return c.lib.err(rc, &buf, "%s (%d %v to %d, rank %d of %d)", name, count, dt, peer, c.rank, c.ranks)
}

// Recv receives count elements from rank peer's matching Send into recv
// (ncclRecv, NCCL 2.7.3 and later).
func (c *Comm) Recv(recv cuda.DevicePtr, count int, dt DataType, peer int, s cuda.Stream) error {
	const name = "ncclRecv"
	if err := c.lib.needs(c.lib.fns.recv, name, "2.7.3"); err != nil {
		return err
	}
	if err := errors.Join(c.checkType(name, dt), c.checkPeer(name, "peer", peer), checkBuffers(name, count, recv)); err != nil {
		return err
	}
	h, err := c.handle()
	if err != nil {
		return err
	}
	var buf errBuf
	p, n := buf.ptr()
	rc := C.gt_nccl_recv(&c.lib.fns, C.uint64_t(recv), C.size_t(count), C.gt_ncclDataType_t(dt), C.int(peer), h,
		C.uintptr_t(s), p, n)
	return c.lib.err(rc, &buf, "%s (%d %v from %d, rank %d of %d)", name, count, dt, peer, c.rank, c.ranks)
}
