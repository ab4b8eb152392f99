package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// storeClient is one rank's connection to the store. Requests are
// multiplexed: each gets an id and a reply channel, and one reader goroutine
// delivers replies, so a blocked Get does not hold up other calls.
type storeClient struct {
	rank, size int
	target     string
	timeout    time.Duration
	conn       net.Conn
	advertise  string
	secret     []byte
	jobID      string
	server     *storeServer // rank 0 only

	wmu sync.Mutex // serializes writes of whole messages

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan storeReply
	broken  error // set once the connection failed; later calls fail fast
	closed  bool
	done    chan struct{}
}

type storeReply struct {
	result []byte
	err    error
}

var _ Store = (*storeClient)(nil)

// replyGrace is how much longer than the server-side wait a client waits
// for the reply before it decides rank 0 stopped answering.
const replyGrace = 5 * time.Second

// clientAuth is what a rank proves to the store with, and what it says
// when refused.
type clientAuth struct {
	secret []byte
	jobID  string
	hint   string
}

// handshakeTimeout bounds one handshake, so a service on MASTER_PORT that
// accepts and says nothing cannot hold a rank until the rendezvous timeout.
const handshakeTimeout = 10 * time.Second

// dialStore connects to the store and runs the handshake, retrying while
// rank 0 is still starting (or shed this connection as idle) until ctx
// ends. A refusal or a foreign service fails at once.
func dialStore(ctx context.Context, host string, port, rank, size int, timeout time.Duration, auth clientAuth) (*storeClient, error) {
	target := net.JoinHostPort(host, strconv.Itoa(port))
	key := storeKey(auth.secret, auth.jobID)
	start := time.Now()
	backoff := 20 * time.Millisecond
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", target)
		if err == nil {
			conn.SetDeadline(earliest(callDeadline(ctx, handshakeTimeout), time.Now().Add(handshakeTimeout)))
			err = clientHandshake(conn, key, rank, auth.jobID, target, auth.hint)
			if err == nil {
				conn.SetDeadline(time.Time{})
				c := &storeClient{
					rank: rank, size: size, target: target, timeout: timeout, conn: conn,
					secret: auth.secret, jobID: auth.jobID,
					pending: make(map[uint64]chan storeReply),
					done:    make(chan struct{}),
				}
				if a, ok := conn.LocalAddr().(*net.TCPAddr); ok {
					c.advertise = advertiseHost(a.IP, host)
				}
				go c.readLoop()
				return c, nil
			}
			conn.Close()
			var he *handshakeError
			if errors.As(err, &he) && !he.retry && ctx.Err() == nil {
				return nil, err
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				// The cause says what stopped it ("terminated signal
				// received"), where ctx.Err() says only "context canceled".
				return nil, fmt.Errorf("rendezvous: rank %d stopped waiting for rank 0's store at %s after %s: %w (last attempt: %v)",
					rank, target, roundDuration(time.Since(start)), context.Cause(ctx), err)
			}
			return nil, fmt.Errorf("rendezvous: rank %d could not reach rank 0's store at %s within %s: %v; check MASTER_ADDR/MASTER_PORT and that rank 0 is running",
				rank, target, roundDuration(time.Since(start)), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// earliest is the earlier of two deadlines.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (c *storeClient) Rank() int             { return c.rank }
func (c *storeClient) Size() int             { return c.size }
func (c *storeClient) AdvertiseHost() string { return c.advertise }
func (c *storeClient) JobID() string         { return c.jobID }

func (c *storeClient) PeerKey(purpose string) []byte { return peerKey(c.secret, c.jobID, purpose) }

func (c *storeClient) readLoop() {
	defer close(c.done)
	for {
		body, err := readMessage(c.conn)
		if err != nil {
			c.fail(err)
			return
		}
		d := &decoder{b: body}
		id, status := d.u64(), d.u8()
		if d.err != nil {
			c.fail(d.err)
			return
		}
		rep := storeReply{result: d.b}
		if status != statusOK {
			rep = storeReply{err: errors.New(string(d.b))}
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- rep // buffered; a caller that gave up left nobody reading
		}
	}
}

// fail ends every pending request with the connection's error.
func (c *storeClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		if c.closed {
			c.broken = errors.New("rendezvous: store client is closed")
		} else {
			c.broken = fmt.Errorf("rendezvous: lost the store at %s: %v (rank 0 probably exited; see its log)", c.target, err)
		}
	}
	for id, ch := range c.pending {
		ch <- storeReply{err: c.broken}
		delete(c.pending, id)
	}
}

// call sends one request (fields writes what follows the op and id)
// and waits for the reply until ctx ends or, for a server-side wait, wait
// plus replyGrace passes.
func (c *storeClient) call(ctx context.Context, op uint8, fields func(*encoder), wait time.Duration) ([]byte, error) {
	ch := make(chan storeReply, 1)
	c.mu.Lock()
	if c.broken != nil {
		err := c.broken
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()

	e := newEncoder()
	e.u8(op)
	e.u64(id)
	fields(e)
	msg := e.finish()
	c.wmu.Lock()
	c.conn.SetWriteDeadline(time.Now().Add(wait + replyGrace))
	_, err := c.conn.Write(msg)
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("rendezvous: send to the store at %s: %w", c.target, err)
	}

	timer := time.NewTimer(wait + replyGrace)
	defer timer.Stop()
	done := ctx.Done()
	for {
		select {
		case rep := <-ch:
			return rep.result, rep.err
		case <-done:
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				// The server enforces the same deadline and is about to
				// answer with what it was waiting for; wait for that.
				done = nil
				continue
			}
			c.forget(id)
			return nil, fmt.Errorf("rendezvous: %s interrupted: %w", opName(op), context.Cause(ctx))
		case <-timer.C:
			c.forget(id)
			return nil, fmt.Errorf("rendezvous: the store at %s did not answer within %s (rank 0 hung?)", c.target, roundDuration(wait+replyGrace))
		}
	}
}

// opName says what a request was waiting for, for an interruption.
func opName(op uint8) string {
	switch op {
	case opJoin:
		return "the join"
	case opGet:
		return "a store read"
	case opWait:
		return "a wait for store keys"
	case opBarrier:
		return "a store barrier"
	}
	return "a store request"
}

func (c *storeClient) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// wait is how long the server may block on a request of ctx.
func (c *storeClient) wait(ctx context.Context) time.Duration {
	return max(time.Until(callDeadline(ctx, c.timeout)), 0)
}

func (c *storeClient) join(ctx context.Context, fields []Field, timeout time.Duration) error {
	wait := min(c.wait(ctx), timeout)
	_, err := c.call(ctx, opJoin, func(e *encoder) {
		e.i64(int64(c.rank))
		e.i64(int64(c.size))
		e.i64(int64(len(fields)))
		for _, f := range fields {
			e.str(f.Name)
			e.str(f.Value)
		}
		e.dur(wait)
	}, wait)
	return err
}

func (c *storeClient) Set(ctx context.Context, key string, value []byte) error {
	_, err := c.call(ctx, opSet, func(e *encoder) { e.str(key); e.bytes(value) }, c.wait(ctx))
	return err
}

func (c *storeClient) Get(ctx context.Context, key string) ([]byte, error) {
	wait := c.wait(ctx)
	return c.call(ctx, opGet, func(e *encoder) { e.str(key); e.dur(wait) }, wait)
}

func (c *storeClient) Add(ctx context.Context, key string, delta int64) (int64, error) {
	res, err := c.call(ctx, opAdd, func(e *encoder) { e.str(key); e.i64(delta) }, c.wait(ctx))
	if err != nil {
		return 0, err
	}
	d := &decoder{b: res}
	v := d.i64()
	if d.err != nil {
		return 0, fmt.Errorf("rendezvous: add %q: %w", key, d.err)
	}
	return v, nil
}

func (c *storeClient) Wait(ctx context.Context, keys ...string) error {
	wait := c.wait(ctx)
	_, err := c.call(ctx, opWait, func(e *encoder) {
		e.i64(int64(len(keys)))
		for _, k := range keys {
			e.str(k)
		}
		e.dur(wait)
	}, wait)
	return err
}

func (c *storeClient) Barrier(ctx context.Context, name string) error {
	wait := c.wait(ctx)
	_, err := c.call(ctx, opBarrier, func(e *encoder) {
		e.str(name)
		e.i64(int64(c.rank))
		e.dur(wait)
	}, wait)
	return err
}

func (c *storeClient) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	err := c.conn.Close()
	<-c.done
	if c.server != nil {
		c.server.close()
	}
	return err
}
