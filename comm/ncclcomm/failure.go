package ncclcomm

import (
	"errors"
	"time"

	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/cuda"
)

// cause is what made the Comm fail: the rank that aborted and its reason.
type cause struct {
	rank int
	err  error
}

// callError is what a call of kind returns once the Comm failed with c.
func (c cause) callError(kind comm.Kind) error {
	return &comm.AbortedError{Rank: c.rank, Op: kind, Reason: c.err}
}

// failure is the recorded cause, or nil while the Comm is healthy.
func (c *Comm) failure() *cause {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return c.cause
}

// fail records cs unless a failure is recorded already, and reports
// whether it did.
func (c *Comm) fail(cs cause) bool {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	if c.cause != nil {
		return false
	}
	c.cause = &cs
	close(c.failed)
	return true
}

// abortWith makes cs the Comm's failure and aborts the NCCL communicator,
// which ends the calls of every rank blocked on it. A failure of this
// rank's own making (publish) is written to the Store first, for the
// peers to report. Should another failure have come first, its abort is
// waited for instead.
func (c *Comm) abortWith(cs cause, publish bool) {
	if c.fail(cs) && publish {
		c.publish(cs)
	}
	_ = c.releaseNCCL(true)
}

// Abort implements comm.Comm: every pending and later call on this rank
// returns a *comm.AbortedError with reason, and so do the peers' (their
// NCCL calls fail once this rank's communicator is aborted, and the reason
// is in the Store). It returns once the communicator is aborted (the
// Store write is bounded by two seconds).
func (c *Comm) Abort(reason error) {
	if reason == nil {
		reason = errors.New("aborted")
	}
	c.abortWith(cause{rank: c.rank, err: reason}, true)
}

// abortGrace is how long an abort lets a call that was just entering NCCL
// on the device thread get inside it. NCCL frees the communicator in
// ncclCommAbort; a call that has loaded the handle but not yet entered the
// library would then use freed memory, while one already inside it is
// released. Go cannot see that last step, so the abort waits for the call
// to leave or for this long, which is ample for a thread that only has to
// cross into C.
const abortGrace = 200 * time.Millisecond

// withNCCL runs fn, an NCCL call on the device thread, unless the
// communicator is released; errReleased then.
func (c *Comm) withNCCL(fn func() error) error {
	c.gmu.Lock()
	if c.gone {
		c.gmu.Unlock()
		return errReleased
	}
	c.busy++
	c.gmu.Unlock()
	defer func() {
		c.gmu.Lock()
		c.busy--
		if c.busy == 0 && c.idle != nil {
			close(c.idle)
			c.idle = nil
		}
		c.gmu.Unlock()
	}()
	return fn()
}

// errReleased is what a call that finds the communicator released returns;
// callers report the failure or the closed Comm behind it instead.
var errReleased = errors.New("ncclcomm: the NCCL communicator was released")

// releaseNCCL ends the NCCL communicator once: aborted (ncclCommAbort,
// from the calling goroutine, since the device thread may be the one
// blocked in NCCL), or finalized and destroyed on the device thread.
// Later callers wait for the first and get its error.
func (c *Comm) releaseNCCL(abort bool) error {
	c.release.Do(func() {
		c.gmu.Lock()
		c.gone = true
		var idle chan struct{}
		if c.busy > 0 {
			idle = make(chan struct{})
			c.idle = idle
		}
		c.gmu.Unlock()
		if !abort {
			// A call still on the device thread finishes before this runs.
			c.releaseErr = c.dev.Do(func(*cuda.Ctx) error { return c.nc.Close() })
			return
		}
		if idle != nil {
			t := time.NewTimer(abortGrace)
			select {
			case <-idle:
			case <-t.C:
			}
			t.Stop()
		}
		c.releaseErr = c.nc.Abort()
	})
	return c.releaseErr
}
