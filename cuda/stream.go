package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include "gt_cuda.h"
*/
import "C"

import (
	"math"
	"time"
)

// NewStream creates a stream. A non-blocking stream does not synchronise
// with the legacy default stream (CU_STREAM_NON_BLOCKING).
func (c *Ctx) NewStream(nonBlocking bool) (Stream, error) {
	flags := C.uint(C.CU_STREAM_DEFAULT)
	if nonBlocking {
		flags = C.CU_STREAM_NON_BLOCKING
	}
	var h C.uintptr_t
	if r := C.gt_cuStreamCreate(c.d.drv.sym.streamCreate, &h, flags); r != C.CUDA_SUCCESS {
		return 0, c.err(r, "cuStreamCreate (device %d)", c.d.info.Ordinal)
	}
	return Stream(h), nil
}

// DestroyStream destroys s; work already queued on it still completes.
func (c *Ctx) DestroyStream(s Stream) error {
	if r := C.gt_cuStreamDestroy(c.d.drv.sym.streamDestroy, C.uintptr_t(s)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuStreamDestroy_v2")
	}
	return nil
}

// StreamSynchronize waits until all work queued on s is done; it returns
// the first error of that work.
func (c *Ctx) StreamSynchronize(s Stream) error {
	if r := C.gt_cuStreamSynchronize(c.d.drv.sym.streamSynchronize, C.uintptr_t(s)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuStreamSynchronize")
	}
	delete(c.d.queued, s)
	return nil
}

// MarkQueued records that work was queued on s by a library that queues
// without this package (cuBLAS, cuBLASLt), so SyncIfQueued waits for it.
// This package's own async calls mark their stream themselves.
func (c *Ctx) MarkQueued(s Stream) { c.d.queued[s] = true }

// SyncIfQueued is StreamSynchronize when anything was queued on s since
// the last wait for it (by this package's async calls or MarkQueued), and
// nothing otherwise: a second synchronisation with nothing in between
// costs no call. It reports whether it waited.
func (c *Ctx) SyncIfQueued(s Stream) (bool, error) {
	if !c.d.queued[s] {
		return false, nil
	}
	return true, c.StreamSynchronize(s)
}

// StreamQuery reports whether all work queued on s is done, without
// waiting (cuStreamQuery): a caller that must not hold the device thread
// while a stream drains polls it instead of calling StreamSynchronize. A
// failure of the queued work is returned as an error.
func (c *Ctx) StreamQuery(s Stream) (done bool, err error) {
	switch r := C.gt_cuStreamQuery(c.d.drv.sym.streamQuery, C.uintptr_t(s)); r {
	case C.CUDA_SUCCESS:
		return true, nil
	case C.CUDA_ERROR_NOT_READY:
		return false, nil
	default:
		return false, c.err(r, "cuStreamQuery")
	}
}

// StreamWaitEvent makes later work on s wait until e's recorded point.
func (c *Ctx) StreamWaitEvent(s Stream, e Event) error {
	c.d.queued[s] = true
	if r := C.gt_cuStreamWaitEvent(c.d.drv.sym.streamWaitEvent, C.uintptr_t(s), C.uintptr_t(e), 0); r != C.CUDA_SUCCESS {
		return c.err(r, "cuStreamWaitEvent")
	}
	return nil
}

// NewEvent creates an event; only timing events can be used with
// EventElapsed, and the others are cheaper to record and wait on.
func (c *Ctx) NewEvent(timing bool) (Event, error) {
	flags := C.uint(C.CU_EVENT_DEFAULT)
	if !timing {
		flags = C.CU_EVENT_DISABLE_TIMING
	}
	var h C.uintptr_t
	if r := C.gt_cuEventCreate(c.d.drv.sym.eventCreate, &h, flags); r != C.CUDA_SUCCESS {
		return 0, c.err(r, "cuEventCreate")
	}
	return Event(h), nil
}

// RecordEvent records e at the current end of s.
func (c *Ctx) RecordEvent(e Event, s Stream) error {
	c.d.queued[s] = true
	if r := C.gt_cuEventRecord(c.d.drv.sym.eventRecord, C.uintptr_t(e), C.uintptr_t(s)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuEventRecord")
	}
	return nil
}

// EventSynchronize waits until e's recorded work is done.
func (c *Ctx) EventSynchronize(e Event) error {
	if r := C.gt_cuEventSynchronize(c.d.drv.sym.eventSynchronize, C.uintptr_t(e)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuEventSynchronize")
	}
	return nil
}

// EventElapsed is the time between two recorded, completed timing events
// (the driver's resolution is about half a microsecond).
func (c *Ctx) EventElapsed(start, end Event) (time.Duration, error) {
	var ms C.float
	if r := C.gt_cuEventElapsedTime(c.d.drv.sym.eventElapsedTime, &ms, C.uintptr_t(start), C.uintptr_t(end)); r != C.CUDA_SUCCESS {
		return 0, c.err(r, "cuEventElapsedTime")
	}
	return time.Duration(math.Round(float64(ms) * float64(time.Millisecond))), nil
}

// DestroyEvent destroys e.
func (c *Ctx) DestroyEvent(e Event) error {
	if r := C.gt_cuEventDestroy(c.d.drv.sym.eventDestroy, C.uintptr_t(e)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuEventDestroy_v2")
	}
	return nil
}
