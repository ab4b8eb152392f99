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
	// pollMin and pollMax bound the pause between two looks at the Comm's
	// stream: short at first, since small collectives finish in
	// microseconds, then longer, so a long one costs the device thread
	// little.
	pollMin = 20 * time.Microsecond
	pollMax = time.Millisecond
	// drainLimit bounds how long a failed call waits for its NCCL call to
	// return after the abort that should end it, so that a library that
	// does not let go cannot hold the caller forever.
	drainLimit = 10 * time.Second
)

// run performs one collective of kind, counted in Stats as bytes: issue
// queues the NCCL call on the Comm's stream (on the device thread, after
// the stream was made to wait for the compute stream), then run polls
// until the stream has finished it. A nil issue is a call with nothing to
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

// wait queues issue and waits for the Comm's stream to finish it.
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
	pause := pollMin
	for {
		done, err := c.query()
		if err != nil {
			return c.callFailed(kind, err)
		}
		if done {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return c.interrupted(ctx, kind, start, deadline, nil)
		case <-c.failed:
			t.Stop()
			return c.failure().callError(kind)
		}
		pause = min(2*pause, pollMax)
	}
}

// enqueue is the device-thread half of a call: order the Comm's stream
// after the work queued on the compute stream so far, then queue the NCCL
// call behind it.
func (c *Comm) enqueue(issue func(x *cuda.Ctx) error) func(x *cuda.Ctx) error {
	return func(x *cuda.Ctx) error {
		if err := x.RecordEvent(c.ready, c.compute); err != nil {
			return err
		}
		if err := x.StreamWaitEvent(c.stream, c.ready); err != nil {
			return err
		}
		return c.withNCCL(func() error { return issue(x) })
	}
}

// query reports whether the Comm's stream is done and, while it is not,
// whether NCCL saw an asynchronous error (a peer that failed or aborted).
func (c *Comm) query() (done bool, err error) {
	err = c.dev.Do(func(x *cuda.Ctx) error {
		var err error
		if done, err = x.StreamQuery(c.stream); err != nil || done {
			return err
		}
		return c.withNCCL(c.nc.AsyncError)
	})
	return done, err
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
