package zero

import (
	"context"
	"fmt"
	"sync"
)

// commOp is one queued unit of communication: a collective (and the backend
// work that goes with it, such as accumulating a reduced chunk). done closes
// when it has run or been skipped; err is set before that.
type commOp struct {
	what string
	ctx  context.Context
	run  func(ctx context.Context) error
	done chan struct{}
	err  error
}

// finished reports, without blocking, whether op is done.
func (op *commOp) finished() bool {
	select {
	case <-op.done:
		return true
	default:
		return false
	}
}

// commLoop runs queued ops one at a time, in submission order, on its own
// goroutine. It is the only issuer of the engine's collectives, which is
// what keeps every rank's sequence identical when ranks submit the same ops
// in the same order, however their timings differ. After the first failure
// every later op is skipped with that failure, since a failed Comm cannot
// run anything and the ranks' sequences have diverged.
//
// A lazy loop has no goroutine: ops run, still in submission order, only
// when the engine waits for one (drive), on the waiting goroutine.
type commLoop struct {
	mu      sync.Mutex
	queue   []*commOp
	running *commOp
	failed  error
	closed  bool
	lazy    bool
	wake    chan struct{} // capacity 1: "the queue changed"
	exited  chan struct{}
}

func newCommLoop(lazy bool) *commLoop {
	l := &commLoop{lazy: lazy, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	if lazy {
		close(l.exited)
	} else {
		go l.serve()
	}
	return l
}

// drive runs a lazy loop's queued ops up to and including op (nothing for
// a loop with its own goroutine).
func (l *commLoop) drive(op *commOp) {
	if !l.lazy {
		return
	}
	for !op.finished() {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return
		}
		next := l.queue[0]
		l.queue = l.queue[1:]
		l.mu.Unlock()
		l.runOne(next)
	}
}

// submit queues run under ctx. what names the op in errors.
func (l *commLoop) submit(ctx context.Context, what string, run func(context.Context) error) *commOp {
	op := &commOp{what: what, ctx: ctx, run: run, done: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		op.err = fmt.Errorf("zero: %s: the engine is closed", what)
		close(op.done)
		return op
	}
	l.queue = append(l.queue, op)
	l.mu.Unlock()
	l.poke()
	return op
}

func (l *commLoop) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *commLoop) serve() {
	defer close(l.exited)
	for {
		l.mu.Lock()
		for len(l.queue) == 0 && !l.closed {
			l.mu.Unlock()
			<-l.wake
			l.mu.Lock()
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return
		}
		op := l.queue[0]
		l.queue = l.queue[1:]
		l.mu.Unlock()
		l.runOne(op)
	}
}

// runOne runs op, or skips it with the loop's first failure.
func (l *commLoop) runOne(op *commOp) {
	l.mu.Lock()
	l.running = op
	failed := l.failed
	l.mu.Unlock()
	if failed != nil {
		op.err = failed
	} else if err := op.run(op.ctx); err != nil {
		op.err = fmt.Errorf("zero: %s: %w", op.what, err)
	}
	l.mu.Lock()
	if op.err != nil && l.failed == nil {
		l.failed = op.err
	}
	l.running = nil
	l.mu.Unlock()
	close(op.done)
}

// failure is the first op failure, or nil.
func (l *commLoop) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// busy reports whether an op is queued or running.
func (l *commLoop) busy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running != nil || len(l.queue) > 0
}

// close lets the queued ops finish and waits for the goroutine to exit.
func (l *commLoop) close() {
	l.mu.Lock()
	l.closed = true
	queued := l.queue
	if l.lazy {
		l.queue = nil
	}
	l.mu.Unlock()
	if l.lazy {
		for _, op := range queued {
			l.runOne(op)
		}
		return
	}
	l.poke()
	<-l.exited
}
