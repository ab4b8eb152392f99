package ncclcomm

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/nccl"
)

const (
	// drainLimit bounds how long a failed call waits for its NCCL call to
	// return after the abort that should end it, so that a library that
	// does not let go cannot hold the caller forever.
	drainLimit = 10 * time.Second
)

// run performs one collective of kind, counted in Stats as bytes: issue
// queues the NCCL call on the Comm's stream (on the device thread, after
// the stream was made to wait for the compute stream), the compute stream
// is made to wait for its completion event, and run blocks on that event
// (AwaitEvent, off the device thread) until the call is done. A nil issue is a call with nothing to
// move, which succeeds on a healthy Comm.
func (c *Comm) run(ctx context.Context, kind comm.Kind, bytes int64, issue func(x *cuda.Ctx) error) error {
	if cs := c.failure(); cs != nil {
		return cs.callError(kind)
	}
	select {
	case <-c.closed:
		return fmt.Errorf("comm: %s on a closed communicator", kind)
	default:
	}
	start := time.Now()
	deadline := callDeadline(ctx, c.timeout)
	cctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if cctx.Err() != nil {
		// The peers may be in this call already: leaving it out would
		// strand them, so it ends the Comm like any interruption.
		return c.interrupted(cctx, kind, start, deadline, nil)
	}
	if issue != nil {
		if err := c.wait(cctx, kind, start, deadline, issue); err != nil {
			return err
		}
	}
	c.smu.Lock()
	c.stats.Add(kind, bytes, time.Since(start).Seconds())
	c.smu.Unlock()
	return nil
}

// wait queues issue and waits for its completion event. Nothing polls:
// the wait is one cuEventSynchronize on the device's waiter thread, and
// a deadline or a failure stops listening to it and aborts the NCCL
// communicator, which ends the call on the device and so the wait.
func (c *Comm) wait(ctx context.Context, kind comm.Kind, start, deadline time.Time, issue func(x *cuda.Ctx) error) error {
	// The NCCL call may block on the device thread until every rank made
	// it (always in the mock, and in NCCL while it connects peers), so it
	// runs on its own goroutine and this one watches the clock.
	queued := make(chan error, 1)
	go func() { queued <- c.dev.Do(c.enqueue(issue)) }()
	select {
	case err := <-queued:
		if err != nil {
			return c.callFailed(kind, err)
		}
	case <-ctx.Done():
		return c.interrupted(ctx, kind, start, deadline, queued)
	case <-c.failed:
		_ = c.releaseNCCL(true)
		drain(queued)
		return c.failure().callError(kind)
	}
	select {
	case err := <-c.dev.AwaitEvent(c.done):
		if err != nil {
			return c.callFailed(kind, err)
		}
		return nil
	case <-ctx.Done():
		return c.interrupted(ctx, kind, start, deadline, nil)
	case <-c.failed:
		return c.failure().callError(kind)
	}
}

// enqueue is the device-thread half of a call: order the Comm's stream
// after the work queued on the compute stream so far, queue the NCCL call
// (with its staging copies) behind it, record the completion event and
// order the compute stream after it. Work queued on the compute stream
// later therefore sees the collective's result without anyone waiting on
// the host; the caller's own wait is only for its return. An error NCCL
// saw asynchronously since the last call (a peer that failed) fails this
// one before it is queued.
func (c *Comm) enqueue(issue func(x *cuda.Ctx) error) func(x *cuda.Ctx) error {
	return func(x *cuda.Ctx) error {
		if err := x.RecordEvent(c.ready, c.compute); err != nil {
			return err
		}
		if err := x.StreamWaitEvent(c.stream, c.ready); err != nil {
			return err
		}
		err := c.withNCCL(func() error {
			if err := c.nc.AsyncError(); err != nil {
				return err
			}
			return issue(x)
		})
		if err != nil {
			return err
		}
		if err := x.RecordEvent(c.done, c.stream); err != nil {
			return err
		}
		return x.StreamWaitEvent(c.compute, c.done)
	}
}

// callFailed turns the error of a call's NCCL or CUDA step into the Comm's
// failure and returns the call's error. NCCL's word that a peer failed
// takes the peer's published reason; anything else is this rank's failure,
// published for the peers.
func (c *Comm) callFailed(kind comm.Kind, err error) error {
	if cs := c.failure(); cs != nil {
		_ = c.releaseNCCL(true)
		return cs.callError(kind)
	}
	switch {
	case errors.Is(err, errReleased):
		// Released without a failure: Close ran during the call.
		return fmt.Errorf("comm: %s on a closed communicator", kind)
	case nccl.IsResult(err, nccl.RemoteError) || nccl.IsResult(err, nccl.SystemError):
		// NCCL before 2.13.4 says ncclSystemError for a peer that left.
		c.abortWith(c.remoteCause(err), false)
	case nccl.IsResult(err, nccl.InvalidArgument):
		c.abortWith(cause{rank: c.rank, err: fmt.Errorf(
			"ncclcomm: NCCL refused the %s; do the ranks disagree on the collective, its length, dtype or op? %w", kind, err)}, true)
	default:
		c.abortWith(cause{rank: c.rank, err: fmt.Errorf("ncclcomm: %s: %w", kind, err)}, true)
	}
	return c.failure().callError(kind)
}

// interrupted ends a call whose context is done: a *comm.TimeoutError when
// the deadline passed, the context's error otherwise. Either way the Comm
// aborts, because the ranks are now at different points of the call, and
// the peers learn why. queued, when not nil, is the call's NCCL step,
// waited for once the abort released it.
func (c *Comm) interrupted(ctx context.Context, kind comm.Kind, start, deadline time.Time, queued <-chan error) error {
	var err error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = &comm.TimeoutError{Op: kind, Elapsed: time.Since(start), Timeout: deadline.Sub(start)}
	} else {
		err = fmt.Errorf("comm: %s interrupted: %w", kind, context.Cause(ctx))
	}
	c.abortWith(cause{rank: c.rank, err: err}, true)
	drain(queued)
	return err
}

// drain waits, up to drainLimit, for a call's NCCL step to return, so
// that no NCCL call still uses the caller's buffers when it gets them
// back.
func drain(queued <-chan error) {
	if queued == nil {
		return
	}
	t := time.NewTimer(drainLimit)
	defer t.Stop()
	select {
	case <-queued:
	case <-t.C:
	}
}
