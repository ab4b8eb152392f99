package nccl

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include "gt_dl.h"
#include "gt_nccl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Comm is one rank's NCCL communicator. Use it from one goroutine at a
// time, with its device's context current (inside cuda.Device.Do); Abort
// is the exception and may be called from anywhere at any time.
type Comm struct {
	lib         *Library
	h           atomic.Uintptr // ncclComm_t; 0 once destroyed or aborted
	rank, ranks int
}

// CommInitRank joins rank (0 ≤ rank < ranks) to the communicator id names
// (ncclCommInitRank). It returns when all ranks have joined, so the ranks
// of one process call it from different goroutines.
func (l *Library) CommInitRank(ranks int, id UniqueID, rank int) (*Comm, error) {
	if ranks < 1 || rank < 0 || rank >= ranks {
		return nil, fmt.Errorf("%w: ncclCommInitRank: rank %d of %d", ErrInvalidArgument, rank, ranks)
	}
	var cid C.gt_ncclUniqueId
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&cid.internal[0])), UniqueIDBytes), id[:])
	var h C.uintptr_t
	var buf errBuf
	p, n := buf.ptr()
	rc := C.gt_nccl_comm_init_rank(&l.fns, &h, C.int(ranks), &cid, C.int(rank), p, n)
	if err := l.err(rc, &buf, "ncclCommInitRank (rank %d of %d)", rank, ranks); err != nil {
		return nil, err
	}
	c := &Comm{lib: l, rank: rank, ranks: ranks}
	c.h.Store(uintptr(h))
	// Read back what NCCL made, so a library that disagrees with the
	// arguments is caught here rather than in a collective.
	gotRank, err := c.commInt(l.fns.comm_user_rank, "ncclCommUserRank")
	if err == nil {
		var gotRanks int
		gotRanks, err = c.commInt(l.fns.comm_count, "ncclCommCount")
		if err == nil && (gotRank != rank || gotRanks != ranks) {
			err = fmt.Errorf("nccl: ncclCommInitRank made rank %d of %d, asked for rank %d of %d", gotRank, gotRanks, rank, ranks)
		}
	}
	if err != nil {
		return nil, errors.Join(err, c.Destroy())
	}
	return c, nil
}

func (c *Comm) commInt(fn unsafe.Pointer, name string) (int, error) {
	h := c.h.Load()
	if h == 0 {
		return 0, ErrClosed
	}
	var v C.int
	var buf errBuf
	p, n := buf.ptr()
	if err := c.lib.err(C.gt_nccl_comm_int(&c.lib.fns, fn, C.uintptr_t(h), &v, p, n), &buf, "%s", name); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Rank is this communicator's rank.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.ranks }

// Library is the NCCL the communicator runs on.
func (c *Comm) Library() *Library { return c.lib }

// Finalize flushes the communicator's outstanding operations
// (ncclCommFinalize, NCCL 2.14.3 and later), before Destroy.
func (c *Comm) Finalize() error {
	if err := c.lib.needs(c.lib.fns.comm_finalize, "ncclCommFinalize", "2.14.3"); err != nil {
		return err
	}
	h := c.h.Load()
	if h == 0 {
		return ErrClosed
	}
	var buf errBuf
	p, n := buf.ptr()
	return c.lib.err(C.gt_nccl_comm_call(&c.lib.fns, c.lib.fns.comm_finalize, C.uintptr_t(h), p, n), &buf,
		"ncclCommFinalize (rank %d of %d)", c.rank, c.ranks)
}

// Destroy frees the communicator (ncclCommDestroy); later calls return
// ErrClosed.
func (c *Comm) Destroy() error {
	h := c.h.Swap(0)
	if h == 0 {
		return ErrClosed
	}
	var buf errBuf
	p, n := buf.ptr()
	return c.lib.err(C.gt_nccl_comm_call(&c.lib.fns, c.lib.fns.comm_destroy, C.uintptr_t(h), p, n), &buf,
		"ncclCommDestroy (rank %d of %d)", c.rank, c.ranks)
}

// Close finalizes (where the library can) and destroys the communicator:
// the orderly shutdown.
func (c *Comm) Close() error {
	if c.h.Load() == 0 {
		return ErrClosed
	}
	var ferr error
	if c.lib.fns.comm_finalize != nil {
		ferr = c.Finalize()
	}
	return errors.Join(ferr, c.Destroy())
}

// Abort frees the communicator without waiting for outstanding operations
// (ncclCommAbort, NCCL 2.4.2 and later): a call blocked on it returns, and
// the other ranks see an error on their own communicators. It may be
// called from any goroutine, also while another call on c is blocked;
// later calls on c return ErrClosed.
func (c *Comm) Abort() error {
	if err := c.lib.needs(c.lib.fns.comm_abort, "ncclCommAbort", "2.4.2"); err != nil {
		return err
	}
	h := c.h.Swap(0)
	if h == 0 {
		return ErrClosed
	}
	var buf errBuf
	p, n := buf.ptr()
	return c.lib.err(C.gt_nccl_comm_call(&c.lib.fns, c.lib.fns.comm_abort, C.uintptr_t(h), p, n), &buf,
		"ncclCommAbort (rank %d of %d)", c.rank, c.ranks)
}

// AsyncError reports an error NCCL found after a call returned, such as a
// failed or aborted peer (ncclCommGetAsyncError, NCCL 2.4.2 and later):
// nil while the communicator is healthy, else an *Error whose Result is
// the asynchronous one. A training loop polls it while waiting on a stream
// and aborts on error.
func (c *Comm) AsyncError() error {
	if err := c.lib.needs(c.lib.fns.comm_get_async_error, "ncclCommGetAsyncError", "2.4.2"); err != nil {
		return err
	}
	h := c.h.Load()
	if h == 0 {
		return ErrClosed
	}
	var r C.gt_ncclResult_t
	var buf errBuf
	p, n := buf.ptr()
	if err := c.lib.err(C.gt_nccl_comm_get_async_error(&c.lib.fns, C.uintptr_t(h), &r, p, n), &buf,
		"ncclCommGetAsyncError"); err != nil {
		return err
	}
	return c.lib.err(r, nil, "asynchronous error (rank %d of %d)", c.rank, c.ranks)
}
