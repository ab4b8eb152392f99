// Package tcp owns gotrain's CPU collectives: a comm.Comm between processes
// over TCP, with ring algorithms, deadlines and fast failure reporting.
//
// Topology. Every pair of ranks shares one TCP connection (a full mesh, set
// up through the rendezvous Store: each rank listens on an ephemeral port of
// the interface that reaches MASTER_ADDR, publishes host:port, dials the
// lower ranks and accepts the higher ones, and both ends of every connection
// prove they hold the job's peer key before anything else is sent; see
// connect.go). Data collectives use only the
// ring r → r+1; the mesh lets a barrier finish in one hop and lets every rank
// see a dead peer's closed socket directly.
//
// Algorithms. AllReduce is a ring reduce-scatter followed by a ring
// all-gather (2(N−1)/N of the message crosses each link); ReduceScatter and
// AllGather are the two halves alone; Broadcast is a ring pipeline from the
// root. Messages move in segments of Options.SegmentBytes, and a segment is
// forwarded as soon as it is reduced, so sending, receiving and reducing
// overlap: each connection has a writer goroutine fed by an unbounded queue
// (no ring deadlock) and a reader goroutine with a bounded number of receive
// buffers (TCP flow control does the rest).
//
// Numerics. Reductions run in fp32 for F32, BF16 and F16 buffers: 16-bit
// inputs are widened once, the reduce-scatter phase carries fp32 on the
// wire, and the owner of each chunk rounds it to the buffer's dtype once
// (round to nearest even) before the all-gather, which moves 16-bit values.
// Avg is Sum followed by a multiplication by 1/N in fp32, done once by the
// chunk's owner. I32 and U16 buffers reduce in their own type (Sum wraps;
// Avg is refused). Each chunk's reduction order is fixed by the ring (it
// starts at the rank after the chunk's owner and ends at the owner), and the
// owner's result is what every rank receives, so results are deterministic
// and bit-identical on every rank.
//
// Buffers the CPU can address (every CPU-backend buffer, host-pool buffers of
// the CUDA backend) are sent from and received into in place: all-reduce,
// all-gather and broadcast work on the buffer's own memory (reduce-scatter
// stages its input, which it must leave intact). Other buffers move through
// the Backend's Download and Upload into host staging buffers owned by the
// Comm and reused across calls. Staging (up to 3× the largest message for
// 16-bit reductions, whose fp32 work area is always staged) is Go heap, not
// backend-accounted memory. A failed collective may leave an in-place
// buffer partly reduced; the Comm is unusable after it anyway.
//
// Failures. A read or write error, an EOF or PeerTimeout of silence on any
// connection (peers send heartbeats when idle; TCP keepalive is on too)
// aborts the Comm: every pending and later call returns a
// *comm.PeerLostError naming the lost rank, and the detecting rank sends an
// abort frame to every live peer, so all ranks learn within seconds, not
// after the call's timeout. Abort, a timeout and a detected disagreement
// between ranks (different collective, length, dtype or op) abort the same
// way with a *comm.AbortedError on the other ranks.
//
// Concurrency: collectives are issued by one goroutine at a time, and the
// Backend is used (Download, Upload, Copy) only from that goroutine; Abort,
// Stats, Rank and Size are safe from any goroutine.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// Options configures New. Zero fields take the defaults named.
type Options struct {
	Rank, Size int // must equal the Store's
	// Timeout bounds each call whose context has no deadline, and the
	// connection setup (default comm.DefaultTimeout, the --comm-timeout flag).
	Timeout time.Duration
	// Name separates communicators sharing one Store (default "world").
	Name string
	// Host is the host other ranks dial to reach this one (default: the
	// Store's AdvertiseHost, on the interface that reaches MASTER_ADDR). An
	// address of this machine is listened on; a host name or an address it
	// cannot bind (NAT) makes the Comm listen on every interface. Either
	// way, only ranks that prove the job's peer key (Store.PeerKey) connect.
	Host string
	// SegmentBytes is the pipelining unit (default 1 MiB).
	SegmentBytes int
	// Heartbeat is how often an idle connection proves it is alive
	// (default 1s); PeerTimeout is how long a silent peer is waited for
	// before it is declared lost (default 10s).
	Heartbeat, PeerTimeout time.Duration
}

const (
	defaultSegment     = 1 << 20
	defaultHeartbeat   = time.Second
	defaultPeerTimeout = 10 * time.Second
	// recvSlots is how many segments a reader buffers per peer before TCP
	// flow control holds the sender back.
	recvSlots = 8
	// socketBuffer is the kernel send and receive buffer asked for per
	// connection (the kernel may cap it).
	socketBuffer = 4 << 20
	// abortFlush bounds how long the last frames (abort, bye) may take to
	// leave, so a peer that stopped reading cannot hold an abort up.
	abortFlush = 2 * time.Second
	// closeLinger is how long Close waits for peers to close their ends, so
	// the final frames are read before the sockets go away.
	closeLinger = time.Second
)

// Comm is a comm.Comm over TCP. See the package documentation.
type Comm struct {
	rank, size  int
	name        string
	be          backend.Backend
	timeout     time.Duration
	heartbeat   time.Duration
	peerTimeout time.Duration
	seg         int     // bytes per data frame, a multiple of 4
	peers       []*peer // peers[rank] is nil

	amu     sync.Mutex
	cause   *cause        // the first failure; nil while healthy
	aborted chan struct{} // closed when cause is set
	closing chan struct{} // closed by Close
	once    sync.Once
	killed  atomic.Bool // tests: the process "died"; send nothing more
	wg      sync.WaitGroup

	// Per-call state, touched only by the goroutine issuing collectives.
	seq     uint64
	sent    []bool // peers the current call queued frames to
	staging staging

	smu   sync.Mutex
	stats comm.Stats
}

var _ comm.Comm = (*Comm)(nil)

// New connects this rank to every other rank of the Store's world and
// returns the Comm. It blocks until all connections are up or ctx's
// deadline (Options.Timeout when ctx has none) passes, naming the ranks that
// never connected.
func New(ctx context.Context, store comm.Store, be backend.Backend, o Options) (*Comm, error) {
	if o.Rank != store.Rank() || o.Size != store.Size() {
		return nil, fmt.Errorf("comm: options say rank %d of %d but the store joined rank %d of %d", o.Rank, o.Size, store.Rank(), store.Size())
	}
	c := &Comm{
		rank:        o.Rank,
		size:        o.Size,
		name:        o.Name,
		be:          be,
		timeout:     o.Timeout,
		heartbeat:   o.Heartbeat,
		peerTimeout: o.PeerTimeout,
		seg:         o.SegmentBytes &^ 3,
		peers:       make([]*peer, o.Size),
		aborted:     make(chan struct{}),
		closing:     make(chan struct{}),
	}
	if c.name == "" {
		c.name = "world"
	}
	if c.timeout <= 0 {
		c.timeout = comm.DefaultTimeout
	}
	if c.heartbeat <= 0 {
		c.heartbeat = defaultHeartbeat
	}
	if c.peerTimeout <= 0 {
		c.peerTimeout = defaultPeerTimeout
	}
	if c.seg <= 0 {
		c.seg = defaultSegment
	}
	if c.size == 1 {
		return c, nil
	}
	host := o.Host
	if host == "" {
		host = store.AdvertiseHost()
	}
	ctx, cancel := context.WithDeadline(ctx, callDeadline(ctx, c.timeout))
	defer cancel()
	if err := c.connect(ctx, store, host); err != nil {
		for _, p := range c.peers {
			if p != nil {
				p.conn.Close()
			}
		}
		return nil, err
	}
	for _, p := range c.peers {
		if p != nil {
			c.wg.Add(2)
			go p.readLoop()
			go p.writeLoop()
		}
	}
	return c, nil
}

// Rank implements comm.Comm.
func (c *Comm) Rank() int { return c.rank }

// Size implements comm.Comm.
func (c *Comm) Size() int { return c.size }

// Stats implements comm.Comm.
func (c *Comm) Stats() comm.Stats {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.stats
}

// Abort implements comm.Comm: every pending and later call on this rank
// returns a *comm.AbortedError with reason, and every peer is told. It
// returns once the abort frames are sent (at most about two seconds), so a
// process may exit right after it.
func (c *Comm) Abort(reason error) {
	if reason == nil {
		reason = errors.New("aborted")
	}
	c.fail(cause{what: causeAborted, rank: c.rank, reporter: c.rank, err: reason})
	c.awaitFarewell()
}

// awaitFarewell waits until every writer has sent its last frame and
// stopped; fail's write deadline bounds the wait.
func (c *Comm) awaitFarewell() {
	for _, p := range c.peers {
		if p != nil {
			<-p.writerDone
		}
	}
}

// fail records the first failure, wakes every blocked call and makes the
// writers send the abort frame (bounded by abortFlush) instead of more data.
func (c *Comm) fail(cs cause) {
	c.amu.Lock()
	if c.cause != nil {
		c.amu.Unlock()
		return
	}
	c.cause = &cs
	close(c.aborted)
	c.amu.Unlock()
	flush := time.Now().Add(abortFlush)
	for _, p := range c.peers {
		if p != nil {
			p.conn.SetWriteDeadline(flush)
		}
	}
}

// failure is the recorded cause, or nil while the Comm is healthy.
func (c *Comm) failure() *cause {
	c.amu.Lock()
	defer c.amu.Unlock()
	return c.cause
}

// Close implements comm.Comm: it tells every peer this rank is leaving,
// waits up to a second for them to close their ends, and releases the
// connections. A Comm that failed closes without the farewell.
func (c *Comm) Close() error {
	c.once.Do(func() {
		close(c.closing)
		if c.size == 1 {
			return
		}
		linger, cancel := context.WithTimeout(context.Background(), closeLinger)
		defer cancel()
		for _, p := range c.peers {
			if p == nil {
				continue
			}
			select {
			case <-p.readerDone:
			case <-linger.Done():
			}
		}
		for _, p := range c.peers {
			if p != nil {
				p.conn.Close()
			}
		}
		c.wg.Wait()
	})
	return nil
}

// kill closes every socket at once without a farewell or an abort frame,
// as the kernel does for a process that died. For tests.
func (c *Comm) kill() {
	c.killed.Store(true)
	for _, p := range c.peers {
		if p != nil {
			p.conn.Close()
		}
	}
	c.fail(cause{what: causeAborted, rank: c.rank, reporter: c.rank, err: errors.New("killed")})
}

// callDeadline is ctx's deadline, or now+def when it has none.
func callDeadline(ctx context.Context, def time.Duration) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(def)
}

// setSocketOptions tunes a peer connection for bulk transfer with prompt
// failure detection. Errors are ignored: each option is an optimization the
// kernel may refuse.
func setSocketOptions(conn *net.TCPConn) {
	conn.SetNoDelay(true)
	conn.SetReadBuffer(socketBuffer)
	conn.SetWriteBuffer(socketBuffer)
	conn.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 5})
}
