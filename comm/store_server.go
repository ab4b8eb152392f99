package comm

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"
)

// storeServer is the rendezvous store rank 0 serves. All state sits under
// mu; every change closes and replaces changed, which wakes the blocked Gets
// and Waits to look again.
//
// A connection is pending until it proves the job secret (at most
// cfg.maxPending at once, the oldest evicted first, each for at most
// cfg.authTimeout), then a rank's connection in conns (at most
// cfg.maxRanks). Nothing but the handshake is read from a pending one.
type storeServer struct {
	ln      net.Listener
	size    int
	cfg     serverConfig
	pending *PendingConns
	quit    chan struct{} // closed by close; ends accept backoffs
	wg      sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	conns    map[net.Conn]struct{} // authenticated
	kv       map[string][]byte
	changed  chan struct{}
	join     joinState
	barriers map[string]*barrierState
	refused  int    // connections refused in the handshake
	lastFrom string // the last of them, for the join's timeout message
	// refusals holds, per rank a refused connection claimed, the timer
	// that fails the join unless that rank joins first.
	refusals   map[int]*time.Timer
	refusalLog int // refusals logged, to bound what a flood can print
}

// serverConfig is who the store serves and how much it holds.
type serverConfig struct {
	key         []byte // storeKey(secret, job id)
	jobID       string
	authTimeout time.Duration // for a new connection to prove the secret
	maxPending  int           // unauthenticated connections held at once
	maxRanks    int           // authenticated connections held at once
	// refusalGrace is how long the join waits for a rank after refusing a
	// connection that claimed it (default: defaultRefusalGrace).
	refusalGrace time.Duration
	// warnf, when not nil, is told of every refusal as it happens.
	warnf func(format string, args ...any)
}

// replyWriteLimit bounds one reply's write to a rank that is not reading.
const replyWriteLimit = 30 * time.Second

const (
	// defaultAuthTimeout is generous for a handshake of one round trip, and
	// short enough that idle connections go long before they pile up.
	defaultAuthTimeout = 10 * time.Second
	defaultMaxPending  = 64
)

// maxRankConns leaves room for each rank's connection plus a restarted or
// duplicate process, whose join is refused with an explanation.
func maxRankConns(size int) int { return 2*size + 8 }

// joinState is the rendezvous itself: a barrier that also checks every
// rank agrees on the world size and on every field, and can fail for
// everyone at once when one rank disagrees. Fields are compared with rank
// 0's; ranks that arrive before rank 0 wait in early.
type joinState struct {
	arrived  map[int]bool
	ref      []Field // rank 0's fields
	haveRef  bool
	early    map[int][]Field
	done     chan struct{}
	failed   error
	complete bool
}

// barrierState is one round of a named barrier. The first waiter to time
// out fails the round for everyone with the same list of missing ranks.
type barrierState struct {
	arrived map[int]bool
	done    chan struct{}
	failed  error
}

func newStoreServer(ln net.Listener, size int, cfg serverConfig) *storeServer {
	if cfg.authTimeout <= 0 {
		cfg.authTimeout = defaultAuthTimeout
	}
	if cfg.maxPending <= 0 {
		cfg.maxPending = defaultMaxPending
	}
	if cfg.maxRanks <= 0 {
		cfg.maxRanks = maxRankConns(size)
	}
	if cfg.refusalGrace <= 0 {
		cfg.refusalGrace = defaultRefusalGrace
	}
	s := &storeServer{
		ln:       ln,
		size:     size,
		cfg:      cfg,
		pending:  NewPendingConns(cfg.maxPending),
		quit:     make(chan struct{}),
		conns:    make(map[net.Conn]struct{}),
		kv:       make(map[string][]byte),
		changed:  make(chan struct{}),
		barriers: make(map[string]*barrierState),
		refusals: make(map[int]*time.Timer),
		join:     joinState{arrived: make(map[int]bool), early: make(map[int][]Field), done: make(chan struct{})},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s
}

// acceptLoop accepts until the server closes. Any other Accept error (file
// descriptors exhausted, a connection reset in the backlog) is waited out
// with a growing pause instead of ending the store for the rest of the run.
func (s *storeServer) acceptLoop() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || ListenerClosed(err) {
				return
			}
			backoff = AcceptBackoff(backoff)
			select {
			case <-time.After(backoff):
			case <-s.quit:
				return
			}
			continue
		}
		backoff = 0
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.pending.Admit(c)
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// close stops accepting, drops every connection and releases every blocked
// request, then waits for the handlers to finish.
func (s *storeServer) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.quit)
	for _, t := range s.refusals {
		t.Stop()
	}
	for c := range s.conns {
		c.Close()
	}
	s.pending.CloseAll()
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

// drain waits until every rank disconnected or grace passed, so the
// answers to a failed rendezvous reach the other ranks before rank 0 stops
// the server.
func (s *storeServer) drain(grace time.Duration) {
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errStoreClosed = errors.New("rendezvous: the store on rank 0 is shutting down")

// authenticate runs the handshake on a pending connection and, once the
// client proved the secret, moves it to the ranks' connections. It reports
// whether the connection may be served.
func (s *storeServer) authenticate(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(s.cfg.authTimeout))
	err := serverHandshake(c, s.cfg.key, s.cfg.jobID, func() uint8 {
		// Leave the pending set before answering, so an eviction cannot
		// close a connection the client was told is accepted.
		if !s.pending.Done(c) {
			return 0
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed || len(s.conns) >= s.cfg.maxRanks {
			return authBusy
		}
		s.conns[c] = struct{}{}
		return authAccepted
	})
	s.pending.Done(c)
	if err != nil {
		s.mu.Lock()
		delete(s.conns, c)
		var log func()
		if rf := (*refusal)(nil); errors.As(err, &rf) {
			log = s.refuseLocked(rf, c.RemoteAddr().String())
		}
		s.mu.Unlock()
		if log != nil {
			log()
		}
		return false
	}
	c.SetDeadline(time.Time{})
	return true
}

// serveConn answers one client once it authenticated. Blocking requests
// run in their own goroutines and give up when the connection ends (gone),
// so a rank that died stops counting as arrived at a barrier it was
// waiting in.
func (s *storeServer) serveConn(c net.Conn) {
	if !s.authenticate(c) {
		c.Close()
		s.wg.Done()
		return
	}
	gone := make(chan struct{})
	var handlers sync.WaitGroup
	defer func() {
		close(gone)
		handlers.Wait()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	var wmu sync.Mutex
	reply := func(id uint64, result []byte, err error) {
		e := newEncoder()
		e.u64(id)
		if err != nil {
			e.u8(statusErr)
			e.b = append(e.b, err.Error()...)
		} else {
			e.u8(statusOK)
			e.b = append(e.b, result...)
		}
		wmu.Lock()
		defer wmu.Unlock()
		// A client that stops reading must not pin this handler: its
		// write fails, and the read loop notices the dead client.
		c.SetWriteDeadline(time.Now().Add(replyWriteLimit))
		if _, err := c.Write(e.finish()); err != nil {
			c.Close()
		}
	}
	for {
		body, err := readMessage(c)
		if err != nil {
			return
		}
		d := &decoder{b: body}
		op, id := d.u8(), d.u64()
		if d.err != nil {
			return
		}
		switch op {
		case opSet, opAdd:
			// Non-blocking ops run in order, so a Set followed by an Add on
			// one connection applies in that order.
			result, err := s.handleQuick(op, d)
			reply(id, result, err)
		case opJoin, opGet, opWait, opBarrier:
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				result, err := s.handleBlocking(op, d, gone)
				reply(id, result, err)
			}()
		default:
			reply(id, nil, fmt.Errorf("rendezvous: unknown store request %d (version mismatch between ranks?)", op))
			return
		}
	}
}

func (s *storeServer) handleQuick(op uint8, d *decoder) ([]byte, error) {
	key := d.str()
	switch op {
	case opSet:
		value := slices.Clone(d.bytes())
		if d.err != nil {
			return nil, d.err
		}
		s.mu.Lock()
		s.kv[key] = value
		s.notifyLocked()
		s.mu.Unlock()
		return nil, nil
	case opAdd:
		delta := d.i64()
		if d.err != nil {
			return nil, d.err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var cur int64
		if v, ok := s.kv[key]; ok {
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("rendezvous: add to key %q: its value %q is not a counter", key, v)
			}
			cur = n
		}
		cur += delta
		s.kv[key] = []byte(strconv.FormatInt(cur, 10))
		s.notifyLocked()
		e := encoder{}
		e.i64(cur)
		return e.b, nil
	}
	return nil, fmt.Errorf("rendezvous: bad quick op %d", op)
}

func (s *storeServer) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *storeServer) handleBlocking(op uint8, d *decoder, gone <-chan struct{}) ([]byte, error) {
	switch op {
	case opJoin:
		rank, size := int(d.i64()), int(d.i64())
		fields := make([]Field, d.count(8)) // each field: two length prefixes
		for i := range fields {
			fields[i] = Field{Name: d.str(), Value: d.str()}
		}
		wait := d.dur()
		if d.err != nil {
			return nil, d.err
		}
		return nil, s.handleJoin(rank, size, fields, wait, gone)
	case opGet:
		key, wait := d.str(), d.dur()
		if d.err != nil {
			return nil, d.err
		}
		var v []byte
		err := s.waitUntil(wait, gone, func() bool {
			var ok bool
			v, ok = s.kv[key]
			return ok
		})
		if errors.Is(err, errWaitTimeout) {
			return nil, fmt.Errorf("rendezvous: key %q was not set within %s", key, roundDuration(wait))
		}
		return v, err
	case opWait:
		keys := make([]string, d.count(4)) // each key: a length prefix
		for i := range keys {
			keys[i] = d.str()
		}
		wait := d.dur()
		if d.err != nil {
			return nil, d.err
		}
		var missing []string
		err := s.waitUntil(wait, gone, func() bool {
			missing = missing[:0]
			for _, k := range keys {
				if _, ok := s.kv[k]; !ok {
					missing = append(missing, k)
				}
			}
			return len(missing) == 0
		})
		if errors.Is(err, errWaitTimeout) {
			return nil, fmt.Errorf("rendezvous: keys %q were not set within %s", missing, roundDuration(wait))
		}
		return nil, err
	case opBarrier:
		name, rank, wait := d.str(), int(d.i64()), d.dur()
		if d.err != nil {
			return nil, d.err
		}
		return nil, s.handleBarrier(name, rank, wait, gone)
	}
	return nil, fmt.Errorf("rendezvous: bad blocking op %d", op)
}

var errWaitTimeout = errors.New("wait timed out")

// waitUntil re-evaluates ready (under mu) after every change until it holds,
// the wait elapses (errWaitTimeout) or the connection ends.
func (s *storeServer) waitUntil(wait time.Duration, gone <-chan struct{}, ready func() bool) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok := ready()
		ch := s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			s.mu.Lock()
			ok := ready()
			s.mu.Unlock()
			if ok {
				return nil
			}
			return errWaitTimeout
		case <-gone:
			return errStoreClosed
		}
	}
}

func (s *storeServer) handleJoin(rank, size int, fields []Field, wait time.Duration, gone <-chan struct{}) error {
	s.mu.Lock()
	j := &s.join
	switch {
	case j.failed != nil:
	case j.complete:
		s.mu.Unlock()
		return fmt.Errorf("rendezvous: rank %d arrived after all %d ranks had already joined (a restarted process? restart the whole job)", rank, s.size)
	case size != s.size:
		j.failed = fmt.Errorf("rendezvous: rank %d was started with WORLD_SIZE=%d but rank 0 with WORLD_SIZE=%d; start every rank with the same WORLD_SIZE", rank, size, s.size)
	case rank < 0 || rank >= s.size:
		j.failed = fmt.Errorf("rendezvous: a process joined as rank %d, outside [0, %d)", rank, s.size)
	case j.arrived[rank]:
		j.failed = fmt.Errorf("rendezvous: two processes joined as rank %d; every rank needs its own RANK", rank)
	default:
		j.arrived[rank] = true
		j.compareFields(rank, fields)
		if j.failed == nil && len(j.arrived) == s.size {
			j.complete = true
			close(j.done)
		}
	}
	if j.failed != nil {
		err := j.failed
		select {
		case <-j.done:
		default:
			close(j.done)
		}
		s.mu.Unlock()
		return err
	}
	done := j.done
	s.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return j.failed
	case <-timer.C:
		s.mu.Lock()
		defer s.mu.Unlock()
		if j.complete || j.failed != nil {
			return j.failed
		}
		j.failed = fmt.Errorf("rendezvous: ranks %v of %d did not arrive within %s; check that every rank was started with the same MASTER_ADDR/MASTER_PORT and WORLD_SIZE%s",
			missingRanks(j.arrived, s.size), s.size, roundDuration(wait), s.refusedNoteLocked())
		close(j.done)
		return j.failed
	case <-gone:
		s.mu.Lock()
		defer s.mu.Unlock()
		if !j.complete {
			delete(j.arrived, rank)
			delete(j.early, rank)
		}
		return errStoreClosed
	}
}

// compareFields checks rank's fields against rank 0's, or keeps them until
// rank 0 arrives, and records the first disagreement as the join's failure.
func (j *joinState) compareFields(rank int, fields []Field) {
	if rank != 0 {
		if !j.haveRef {
			j.early[rank] = fields
			return
		}
		if msg := fieldsDisagreement(j.ref, fields, rank); msg != "" {
			j.failed = errors.New(msg)
		}
		return
	}
	j.ref, j.haveRef = fields, true
	ranks := make([]int, 0, len(j.early))
	for r := range j.early {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)
	for _, r := range ranks {
		if msg := fieldsDisagreement(j.ref, j.early[r], r); msg != "" {
			j.failed = errors.New(msg)
			break
		}
	}
	j.early = nil
}

// refusedNoteLocked explains a missing rank by the connections that failed
// to prove the secret, if any did.
func (s *storeServer) refusedNoteLocked() string {
	if s.refused == 0 {
		return ""
	}
	return fmt.Sprintf("; %d connection(s) to the store were refused, the last from %s: a rank started with a different job secret (or, when it was derived, different settings), or a rank of another job using this port",
		s.refused, s.lastFrom)
}

func (s *storeServer) handleBarrier(name string, rank int, wait time.Duration, gone <-chan struct{}) error {
	s.mu.Lock()
	if rank < 0 || rank >= s.size {
		s.mu.Unlock()
		return fmt.Errorf("rendezvous: barrier %q: rank %d outside [0, %d)", name, rank, s.size)
	}
	b := s.barriers[name]
	if b == nil {
		b = &barrierState{arrived: make(map[int]bool), done: make(chan struct{})}
		s.barriers[name] = b
	}
	if b.arrived[rank] {
		s.mu.Unlock()
		return fmt.Errorf("rendezvous: rank %d entered barrier %q twice", rank, name)
	}
	b.arrived[rank] = true
	if len(b.arrived) == s.size {
		close(b.done)
		delete(s.barriers, name) // the name may be used again
	}
	s.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-b.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return b.failed
	case <-timer.C:
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-b.done:
			return b.failed
		default:
		}
		b.failed = fmt.Errorf("rendezvous: barrier %q: ranks %v of %d did not arrive within %s",
			name, missingRanks(b.arrived, s.size), s.size, roundDuration(wait))
		close(b.done)
		if s.barriers[name] == b {
			delete(s.barriers, name)
		}
		return b.failed
	case <-gone:
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-b.done:
		default:
			delete(b.arrived, rank)
		}
		return errStoreClosed
	}
}

// missingRanks lists the ranks of [0, size) not in arrived.
func missingRanks(arrived map[int]bool, size int) []int {
	var m []int
	for r := range size {
		if !arrived[r] {
			m = append(m, r)
		}
	}
	return m
}
