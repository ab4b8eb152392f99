package comm

import (
	"errors"
	"net"
	"sync"
	"time"
)

// PendingConns holds the accepted connections that have not yet proven the
// job secret, and bounds how many there are. Admitting one more than the cap
// closes the oldest: a real rank finishes its handshake within a round trip,
// so it is never the oldest for long, while a flood of idle or slow
// connections can no longer exhaust the listener's file descriptors or lock
// the real ranks out. Safe for concurrent use.
type PendingConns struct {
	mu     sync.Mutex
	max    int
	seq    uint64
	conns  map[net.Conn]uint64 // admission order
	closed bool
}

// NewPendingConns returns an empty set holding at most max connections
// (at least 1).
func NewPendingConns(max int) *PendingConns {
	if max < 1 {
		max = 1
	}
	return &PendingConns{max: max, conns: make(map[net.Conn]uint64)}
}

// Admit adds c, first closing the oldest pending connection when the set
// is full. Once CloseAll ran, it closes c instead and reports false, so a
// connection accepted while the listener shuts down is not left open.
func (p *PendingConns) Admit(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	for len(p.conns) >= p.max {
		var oldest net.Conn
		var at uint64
		for o, s := range p.conns {
			if oldest == nil || s < at {
				oldest, at = o, s
			}
		}
		delete(p.conns, oldest)
		oldest.Close()
	}
	p.seq++
	p.conns[c] = p.seq
	return true
}

// Done removes c once its handshake ended either way. It reports whether c
// was still pending; false means it was evicted (and closed) meanwhile, so a
// handshake that just succeeded on it must be discarded.
func (p *PendingConns) Done(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.conns[c]
	delete(p.conns, c)
	return ok
}

// Len is how many connections are pending.
func (p *PendingConns) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// CloseAll closes and forgets every pending connection, and every one
// admitted later.
func (p *PendingConns) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// AcceptBackoff is how long an accept loop waits after a failed Accept
// before trying again, given the previous wait (0 at first): 5 ms doubling
// to 1 s, as net/http's server does. Temporary errors (EMFILE when file
// descriptors run out, a connection reset before it was accepted) must not
// stop a listener for good.
func AcceptBackoff(prev time.Duration) time.Duration {
	if prev == 0 {
		return 5 * time.Millisecond
	}
	return min(2*prev, time.Second)
}

// ListenerClosed reports whether an Accept error means the listener was
// closed (stop accepting) rather than a temporary failure (back off and go
// on).
func ListenerClosed(err error) bool {
	return errors.Is(err, net.ErrClosed)
}
