package tcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// call is one collective in progress: its deadline and the header its data
// frames carry. The peers it queued frames to are in Comm.sent, flushed
// before it returns.
type call struct {
	c      *Comm
	ctx    context.Context
	cancel context.CancelFunc
	want   header
	start  time.Time
	limit  time.Duration
	bytes  int64
}

// begin starts a call of kind on count elements of dt (aux: broadcast
// root) that Stats will count as bytes. It fails at once on a failed or
// closed Comm.
func (c *Comm) begin(ctx context.Context, kind comm.Kind, dt backend.DType, op comm.Op, count, aux int, bytes int) (*call, error) {
	if cs := c.failure(); cs != nil {
		c.awaitFarewell()
		return nil, cs.callError(kind, c.rank)
	}
	select {
	case <-c.closing:
		return nil, fmt.Errorf("comm: %s on a closed communicator", kind)
	default:
	}
	start := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = start.Add(c.timeout)
	}
	cctx, cancel := context.WithDeadline(ctx, deadline)
	c.seq++
	clear(c.sent)
	if c.sent == nil {
		c.sent = make([]bool, c.size)
	}
	return &call{
		c:      c,
		ctx:    cctx,
		cancel: cancel,
		want:   header{typ: frameData, kind: kind, dtype: dt, op: op, seq: c.seq, count: uint64(count), aux: int32(aux)},
		start:  start,
		limit:  deadline.Sub(start),
		bytes:  int64(bytes),
	}, nil
}

// end records a successful call in Stats and passes err through. A call
// that failed first waits until this rank's abort frames are out: the
// caller is likely to exit at once, and peers that only saw the socket close
// would blame this rank instead of the real cause.
func (cl *call) end(err error) error {
	cl.cancel()
	c := cl.c
	if err != nil {
		if c.failure() != nil {
			c.awaitFarewell()
		}
		return err
	}
	c.smu.Lock()
	c.stats.Add(cl.want.kind, cl.bytes, time.Since(cl.start).Seconds())
	c.smu.Unlock()
	return nil
}

// send queues payload (a view of staging memory that must stay unchanged
// until flush) as one data frame to p.
func (cl *call) send(p *peer, payload []byte) {
	p.enqueue(outFrame{hdr: cl.want, payload: payload})
	cl.c.sent[p.rank] = true
}

// flush waits until every frame this call queued has been written.
func (cl *call) flush() error {
	c := cl.c
	for r, sent := range c.sent {
		if !sent {
			continue
		}
		p := c.peers[r]
		done := make(chan struct{})
		p.enqueue(outFrame{done: done})
		select {
		case <-done:
		case <-p.writerDone:
			return cl.peerGone(p)
		case <-c.aborted:
			return c.failure().callError(cl.want.kind, c.rank)
		case <-cl.ctx.Done():
			return cl.interrupted([]int{r})
		}
	}
	return nil
}

// recv returns the next data frame from p, which must belong to this call
// and carry n bytes. The caller releases the payload to p. missing, when
// not nil, lists the ranks still waited for should the deadline pass.
func (cl *call) recv(p *peer, n int, missing func() []int) ([]byte, error) {
	c := cl.c
	select {
	case f := <-p.frames:
		return cl.check(p, f, n)
	case <-p.readerDone:
		select {
		case f := <-p.frames:
			return cl.check(p, f, n)
		default:
		}
		return nil, cl.peerGone(p)
	case <-c.aborted:
		return nil, c.failure().callError(cl.want.kind, c.rank)
	case <-cl.ctx.Done():
		who := []int{p.rank}
		if missing != nil {
			who = missing()
		}
		return nil, cl.interrupted(who)
	}
}

func (cl *call) check(p *peer, f inFrame, n int) ([]byte, error) {
	c := cl.c
	if f.hdr.sameCall(cl.want) && int(f.hdr.plen) == n {
		return f.payload, nil
	}
	p.release(f.payload)
	var err error
	if f.hdr.sameCall(cl.want) {
		err = fmt.Errorf("rank %d sent a %d-byte segment of %s where rank %d expected %d bytes (ranks configured with different segment sizes?)",
			p.rank, f.hdr.plen, cl.want.describe(), c.rank, n)
	} else {
		err = fmt.Errorf("ranks disagree on the collective: rank %d sent %s but rank %d is in %s; every rank must issue the same collectives in the same order with the same lengths, dtypes and ops",
			p.rank, f.hdr.describe(), c.rank, cl.want.describe())
	}
	c.fail(cause{what: causeAborted, rank: c.rank, reporter: c.rank, err: err})
	return nil, c.failure().callError(cl.want.kind, c.rank)
}

// peerGone is the error for a peer whose connection ended without a
// recorded failure: it closed its Comm while this rank still needed it.
func (cl *call) peerGone(p *peer) error {
	c := cl.c
	if cs := c.failure(); cs != nil {
		return cs.callError(cl.want.kind, c.rank)
	}
	err := errors.New("it closed its communicator while this rank was still in a collective")
	if !p.bye.Load() && p.readErr != nil {
		err = describeNetErr(p.readErr, c.peerTimeout)
	}
	c.fail(cause{what: causeLost, rank: p.rank, reporter: c.rank, err: err})
	return c.failure().callError(cl.want.kind, c.rank)
}

// interrupted ends a call whose context is done: a *comm.TimeoutError naming
// the ranks waited for when the deadline passed, the context's error
// otherwise. Either way the Comm aborts, because the ranks are now at
// different points of the call, and the peers learn why.
func (cl *call) interrupted(waitingFor []int) error {
	c := cl.c
	var err error
	if errors.Is(cl.ctx.Err(), context.DeadlineExceeded) {
		err = &comm.TimeoutError{Op: cl.want.kind, Peers: waitingFor, Elapsed: time.Since(cl.start), Timeout: cl.limit}
	} else {
		err = fmt.Errorf("comm: %s interrupted: %w", cl.want.kind, context.Cause(cl.ctx))
	}
	c.fail(cause{what: causeAborted, rank: c.rank, reporter: c.rank, err: err})
	return err
}
