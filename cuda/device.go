package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include "gt_cuda.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// maxDeferred bounds the calls Enqueue holds before it hands them to the
// device thread itself: enough to carry a layer's launches in one
// handoff, few enough that the GPU is never starved for long.
const maxDeferred = 256

// Device is one open GPU: its primary context, current on an OS thread
// that a goroutine of the Device holds locked for the Device's life. Every
// call that needs the context runs on that thread (see the package doc).
// Device's methods are safe for concurrent use; concurrent calls run one
// at a time in arrival order.
type Device struct {
	drv  *Driver
	info DeviceInfo
	dev  C.CUdevice
	ctx  uintptr

	// queued marks the streams that may have work no synchronisation
	// has waited for; only the device thread touches it.
	queued map[Stream]bool

	work     chan func()
	quit     chan struct{}
	done     chan struct{}
	closing  sync.Once
	closeErr error

	// waits feeds the waiter thread (AwaitEvent): a second locked OS
	// thread with the primary context current, so that a goroutine can
	// block until an event completes without holding the device thread.
	waits      chan waitRequest
	waiterDone chan struct{}
	// waitMu orders AwaitEvent's sends against the waiter's shutdown:
	// once waitClosed is set no request enters waits, and the waiter
	// answers those already there with ErrClosed, so no AwaitEvent is
	// left without an answer.
	waitMu     sync.Mutex
	waitClosed bool

	// pending holds Enqueue's calls until the next job on the device
	// thread runs them first, in order.
	pmu     sync.Mutex
	pending []deferredCall

	handoffs, deferredRuns atomic.Int64
}

type deferredCall struct {
	fn   func(c *Ctx) error
	sink func(error)
}

// HandoffStats is how a Device's work reached its thread: Handoffs jobs
// (each a goroutine handoff: Do and the calls built on it) carrying
// Deferred calls queued by Enqueue besides their own.
type HandoffStats struct {
	Handoffs, Deferred int64
}

// HandoffStats reports the handoffs and deferred calls so far.
func (d *Device) HandoffStats() HandoffStats {
	return HandoffStats{Handoffs: d.handoffs.Load(), Deferred: d.deferredRuns.Load()}
}

// Enqueue defers fn to the device thread without a handoff of its own:
// it runs, in call order with every other Enqueue and ahead of the fn of
// any Do that starts after this call, when the next job reaches the
// thread, or at once when maxDeferred calls are waiting. fn's error goes
// to sink (on the device thread; sink must not call Do), which is how
// asynchronous work (kernel launches, GEMMs) reports a failure the next
// synchronisation returns anyway. fn follows Do's rules. On a closed
// device sink gets ErrClosed and fn never runs.
func (d *Device) Enqueue(fn func(c *Ctx) error, sink func(error)) {
	select {
	case <-d.done:
		sink(fmt.Errorf("%w (device %d)", ErrClosed, d.info.Ordinal))
		return
	default:
	}
	d.pmu.Lock()
	d.pending = append(d.pending, deferredCall{fn: fn, sink: sink})
	full := len(d.pending) >= maxDeferred
	d.pmu.Unlock()
	if full {
		_ = d.Do(func(*Ctx) error { return nil }) // a closed device: the sinks hear it below
	}
}

// runPending runs the deferred calls on the device thread, oldest first.
// A panic in one is the job's panic, as in Do.
func (d *Device) runPending(c *Ctx) {
	d.pmu.Lock()
	calls := d.pending
	d.pending = nil
	d.pmu.Unlock()
	d.deferredRuns.Add(int64(len(calls)))
	for _, k := range calls {
		if err := k.fn(c); err != nil {
			k.sink(err)
		}
	}
}

// dropPending tells the sinks of calls that will never run why.
func (d *Device) dropPending() {
	d.pmu.Lock()
	calls := d.pending
	d.pending = nil
	d.pmu.Unlock()
	for _, k := range calls {
		k.sink(fmt.Errorf("%w (device %d)", ErrClosed, d.info.Ordinal))
	}
}

type waitRequest struct {
	e    Event
	done chan<- error
}

// Ctx gives the driver calls that need the device's context. A *Ctx is
// only valid inside the function passed to Device.Do, on the device's
// thread.
type Ctx struct {
	d *Device
}

// Open retains device ordinal's primary context and makes it current on a
// new locked OS thread. Close releases both.
func (drv *Driver) Open(ordinal int) (*Device, error) {
	info, err := drv.DeviceInfo(ordinal)
	if err != nil {
		return nil, err
	}
	dev, err := drv.device(ordinal)
	if err != nil {
		return nil, err
	}
	d := &Device{
		drv: drv, info: info, dev: dev, queued: map[Stream]bool{},
		work: make(chan func()), quit: make(chan struct{}), done: make(chan struct{}),
		waits: make(chan waitRequest, 64), waiterDone: make(chan struct{}),
	}
	started := make(chan error, 1)
	go d.serve(started)
	if err := <-started; err != nil {
		close(d.waiterDone)
		return nil, err
	}
	go d.waiter(started)
	if err := <-started; err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// waiter is the thread AwaitEvent's waits run on. It makes the primary
// context (retained by serve) current too: the driver lets one context be
// current on several threads, and its calls are thread-safe.
func (d *Device) waiter(started chan<- error) {
	runtime.LockOSThread()
	defer close(d.waiterDone)
	if r := C.gt_cuCtxSetCurrent(d.drv.sym.ctxSetCurrent, C.uintptr_t(d.ctx)); r != C.CUDA_SUCCESS {
		started <- d.drv.err(r, "cuCtxSetCurrent (device %d, waiter thread)", d.info.Ordinal)
		return
	}
	started <- nil
	for {
		select {
		case w := <-d.waits:
			var err error
			if r := C.gt_cuEventSynchronize(d.drv.sym.eventSynchronize, C.uintptr_t(w.e)); r != C.CUDA_SUCCESS {
				err = d.drv.err(r, "cuEventSynchronize (device %d)", d.info.Ordinal)
			}
			w.done <- err
		case <-d.quit:
			d.waitMu.Lock()
			d.waitClosed = true
			d.waitMu.Unlock()
			for len(d.waits) > 0 {
				(<-d.waits).done <- d.closedErr()
			}
			C.gt_cuCtxSetCurrent(d.drv.sym.ctxSetCurrent, 0)
			return
		}
	}
}

// closedErr is what a wait on a closed device answers.
func (d *Device) closedErr() error { return fmt.Errorf("%w (device %d)", ErrClosed, d.info.Ordinal) }

// AwaitEvent waits for e's recorded work on the device's waiter thread
// and delivers the outcome (nil, the work's failure, or ErrClosed) on the
// returned channel, which has room for it. The device thread stays free
// meanwhile, and nothing polls: the caller blocks in cuEventSynchronize
// by proxy and may stop listening (a deadline) at any time. Waits run one
// at a time in call order, so await events of one stream in the order
// they were recorded. Record e (in a Do) before the call.
func (d *Device) AwaitEvent(e Event) <-chan error {
	res := make(chan error, 1)
	d.waitMu.Lock()
	defer d.waitMu.Unlock()
	if d.waitClosed {
		res <- d.closedErr()
		return res
	}
	// A full queue waits for room, or for Close (the waiter then takes
	// waitMu, after this call gives it up, and answers what is queued).
	select {
	case d.waits <- waitRequest{e: e, done: res}:
	case <-d.quit:
		res <- d.closedErr()
	}
	return res
}

// serve is the device thread: it never unlocks its OS thread, so when it
// returns the runtime ends the thread, and the context binding with it.
func (d *Device) serve(started chan<- error) {
	runtime.LockOSThread()
	defer close(d.done)
	var ctx C.uintptr_t
	if r := C.gt_cuDevicePrimaryCtxRetain(d.drv.sym.primaryCtxRetain, &ctx, d.dev); r != C.CUDA_SUCCESS {
		started <- d.drv.err(r, "cuDevicePrimaryCtxRetain (device %d)", d.info.Ordinal)
		return
	}
	d.ctx = uintptr(ctx)
	if r := C.gt_cuCtxSetCurrent(d.drv.sym.ctxSetCurrent, C.uintptr_t(d.ctx)); r != C.CUDA_SUCCESS {
		started <- d.drv.err(r, "cuCtxSetCurrent (device %d)", d.info.Ordinal)
		C.gt_cuDevicePrimaryCtxRelease(d.drv.sym.primaryCtxRelease, d.dev)
		return
	}
	started <- nil
	for {
		select {
		case f := <-d.work:
			f()
		case <-d.quit:
			d.runPending(&Ctx{d: d})
			<-d.waiterDone // its thread lets go of the context first
			C.gt_cuCtxSetCurrent(d.drv.sym.ctxSetCurrent, 0)
			if r := C.gt_cuDevicePrimaryCtxRelease(d.drv.sym.primaryCtxRelease, d.dev); r != C.CUDA_SUCCESS {
				d.closeErr = d.drv.err(r, "cuDevicePrimaryCtxRelease_v2 (device %d)", d.info.Ordinal)
			}
			return
		}
	}
}

// Close stops the device thread and releases the primary context. Memory,
// streams and modules still allocated belong to the context and are freed
// by the driver once no one retains it. Close is idempotent.
func (d *Device) Close() error {
	d.closing.Do(func() {
		close(d.quit)
		<-d.done
		<-d.waiterDone
		d.dropPending() // Enqueued after the thread's last look
	})
	return d.closeErr
}

// Info is what the driver reported about the device when it was opened.
func (d *Device) Info() DeviceInfo { return d.info }

// Driver is the driver the device was opened with.
func (d *Device) Driver() *Driver { return d.drv }

// Do runs fn on the device's thread with its primary context current and
// returns fn's error, or ErrClosed if the device is closed. fn must not
// call Do (of any Device whose thread could be waiting on this one) nor
// keep c. A panic in fn is re-raised in the caller's goroutine. fn must
// not end its goroutine (runtime.Goexit, t.FailNow): that would end the
// device's thread, closing the device without releasing its context; the
// caller's goroutine is then ended the same way.
func (d *Device) Do(fn func(c *Ctx) error) error {
	type outcome struct {
		err      error
		panicked bool
		panicV   any
	}
	res := make(chan outcome, 1)
	job := func() {
		o := outcome{panicked: true}
		defer func() {
			if o.panicked {
				// recover is nil only for runtime.Goexit: a panic(nil)
				// recovers as *runtime.PanicNilError.
				o.panicV = recover()
			}
			res <- o
		}()
		c := &Ctx{d: d}
		d.runPending(c)
		o.err = fn(c)
		o.panicked = false
	}
	d.handoffs.Add(1)
	select {
	case d.work <- job:
	case <-d.done:
		d.dropPending()
		return fmt.Errorf("%w (device %d)", ErrClosed, d.info.Ordinal)
	}
	o := <-res
	if o.panicked {
		if o.panicV == nil {
			runtime.Goexit()
		}
		panic(o.panicV)
	}
	return o.err
}

// err builds an *Error for a call on this device.
func (c *Ctx) err(r C.CUresult, op string, args ...any) error {
	return c.d.drv.err(r, op, args...)
}

// Device is the device c belongs to.
func (c *Ctx) Device() *Device { return c.d }

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (c *Ctx) Synchronize() error {
	if r := C.gt_cuCtxSynchronize(c.d.drv.sym.ctxSynchronize); r != C.CUDA_SUCCESS {
		return c.err(r, "cuCtxSynchronize (device %d)", c.d.info.Ordinal)
	}
	clear(c.d.queued)
	return nil
}

// CurrentContext is the context current on the calling thread as the
// driver sees it (the primary context's handle inside Do); it lets tests
// and other libraries check the thread binding.
func (c *Ctx) CurrentContext() (uintptr, error) {
	var h C.uintptr_t
	if r := C.gt_cuCtxGetCurrent(c.d.drv.sym.ctxGetCurrent, &h); r != C.CUDA_SUCCESS {
		return 0, c.err(r, "cuCtxGetCurrent")
	}
	return uintptr(h), nil
}

// PrimaryContext is the device's primary context handle (CUcontext).
func (d *Device) PrimaryContext() uintptr { return d.ctx }
