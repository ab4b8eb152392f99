package tcp

import (
	"context"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gotrain/gotrain/comm"
)

// handshakeLimit bounds how long an accepted connection may take to say
// hello, so a stray client cannot stall the setup.
const handshakeLimit = 10 * time.Second

// maxPendingPeers bounds the accepted connections still in their hello;
// beyond it the oldest is dropped (comm.PendingConns), so idle connections
// cannot keep the real peers out.
const maxPendingPeers = 32

func (c *Comm) addrKey(rank int) string { return fmt.Sprintf("gotrain/tcp/%s/addr/%d", c.name, rank) }

// keyPurpose names this communicator's peer key (comm.Store.PeerKey).
func (c *Comm) keyPurpose() string { return "tcp/" + c.name }

// connect builds the full mesh: listen on an ephemeral port, publish
// host:port, dial every lower rank and accept every higher one, each
// connection opened by a hello exchange in which both sides prove they hold
// the job's peer key and check rank, world size and communicator name.
//
// The hello:
//
//	acceptor → dialer   challenge: version, acceptor nonce
//	dialer → acceptor   hello: version, rank, size, dialer nonce, proof "dialer", name
//	acceptor → dialer   hello: version, rank, size, zeros, proof "acceptor", name
//	                    (or a refusal saying why)
//
// Both proofs are HMACs under the peer key over both ranks, the world size,
// the name and both nonces (transcript), so neither side can be replayed
// from another connection, and a listener that does not know the key (a
// foreign process at a published address) is not taken for a peer.
func (c *Comm) connect(ctx context.Context, store comm.Store, host string) error {
	ln, err := listenPeers(ctx, host)
	if err != nil {
		return fmt.Errorf("comm: rank %d cannot listen for peers: %w", c.rank, err)
	}
	defer ln.Close()
	addr := net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if err := store.Set(ctx, c.addrKey(c.rank), []byte(addr)); err != nil {
		return fmt.Errorf("comm: rank %d could not publish its address: %w", c.rank, err)
	}
	key := store.PeerKey(c.keyPurpose())

	accepted := make(chan error, 1)
	go func() { accepted <- c.acceptPeers(ctx, ln, key) }()
	for p := range c.rank {
		if err := c.dialPeer(ctx, store, key, p); err != nil {
			ln.Close() // ends acceptPeers
			<-accepted
			return err
		}
	}
	return <-accepted
}

// listenPeers listens on an ephemeral port of host when host is an address
// of this machine, so the mesh is not offered on other networks; a host name
// or an address this machine cannot bind (NAT) listens on every interface.
func listenPeers(ctx context.Context, host string) (*net.TCPListener, error) {
	var lc net.ListenConfig
	if ip := net.ParseIP(host); ip != nil {
		if ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(host, "0")); err == nil || ip.IsLoopback() {
			if err != nil {
				return nil, err
			}
			return ln.(*net.TCPListener), nil
		}
	}
	ln, err := lc.Listen(ctx, "tcp", ":0")
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}

// greeted is an accepted connection whose dialer proved the key.
type greeted struct {
	rank int
	conn *net.TCPConn
}

// acceptPeers accepts until every higher rank connected. Hellos run
// concurrently, each under handshakeLimit, so a silent or hostile
// connection cannot hold up the real peers; a temporary Accept error is
// waited out.
func (c *Comm) acceptPeers(ctx context.Context, ln *net.TCPListener, key []byte) error {
	deadline, _ := ctx.Deadline()
	ln.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ln.SetDeadline(time.Now()) })
	defer stop()
	start := time.Now()

	pending := comm.NewPendingConns(maxPendingPeers)
	ready := make(chan greeted)
	quit := make(chan struct{})
	acceptErr := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { acceptErr <- c.acceptLoop(ln, key, deadline, pending, ready, quit, &wg) })
	defer func() {
		close(quit)
		ln.SetDeadline(time.Now())
		pending.CloseAll()
		wg.Wait()
	}()

	for got := c.size - 1 - c.rank; got > 0; {
		select {
		case g := <-ready:
			if c.peers[g.rank] != nil { // a second process claiming the rank
				g.conn.Close()
				continue
			}
			c.peers[g.rank] = newPeer(c, g.rank, g.conn)
			got--
		case err := <-acceptErr:
			var missing []int
			for r := c.rank + 1; r < c.size; r++ {
				if c.peers[r] == nil {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("comm: ranks %v never connected to rank %d within %s: %v",
				missing, c.rank, time.Since(start).Round(time.Millisecond), err)
		}
	}
	return nil
}

// acceptLoop accepts connections and greets each in its own goroutine,
// passing the proven ones to ready, until the listener's deadline passes or
// it is closed.
func (c *Comm) acceptLoop(ln *net.TCPListener, key []byte, deadline time.Time, pending *comm.PendingConns,
	ready chan<- greeted, quit <-chan struct{}, wg *sync.WaitGroup) error {
	var backoff time.Duration
	for {
		conn, err := ln.AcceptTCP()
		if err != nil {
			if comm.ListenerClosed(err) || errors.Is(err, os.ErrDeadlineExceeded) {
				return err
			}
			backoff = comm.AcceptBackoff(backoff)
			select {
			case <-time.After(backoff):
				continue
			case <-quit:
				return err
			}
		}
		backoff = 0
		if !pending.Admit(conn) {
			return net.ErrClosed // acceptPeers is returning
		}
		wg.Go(func() {
			rank, err := c.greetAccepted(conn, key, deadline)
			if !pending.Done(conn) || err != nil {
				conn.Close() // not a peer of this communicator; keep waiting for the real ones
				return
			}
			select {
			case ready <- greeted{rank: rank, conn: conn}:
			case <-quit:
				conn.Close()
			}
		})
	}
}

// greetAccepted runs the acceptor's side of the hello on a new connection.
func (c *Comm) greetAccepted(conn *net.TCPConn, key []byte, deadline time.Time) (int, error) {
	conn.SetDeadline(earliest(deadline, time.Now().Add(handshakeLimit)))
	defer conn.SetDeadline(time.Time{})
	h, err := acceptHello(conn, key, c.self(), func(h hello) error {
		if h.rank <= c.rank || h.rank >= c.size {
			return fmt.Errorf("rank %d accepts connections from ranks %d to %d only, not from rank %d", c.rank, c.rank+1, c.size-1, h.rank)
		}
		return c.checkHello(h)
	})
	if err != nil {
		return 0, err
	}
	setSocketOptions(conn)
	return h.rank, nil
}

func (c *Comm) self() hello {
	return hello{version: wireVersion, rank: c.rank, size: c.size, name: c.name}
}

func (c *Comm) dialPeer(ctx context.Context, store comm.Store, key []byte, p int) error {
	addr, err := store.Get(ctx, c.addrKey(p))
	if err != nil {
		return fmt.Errorf("comm: rank %d never published its address: %w", p, err)
	}
	var d net.Dialer
	backoff := 10 * time.Millisecond
	var conn net.Conn
	for {
		conn, err = d.DialContext(ctx, "tcp", string(addr))
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("comm: rank %d cannot connect to rank %d at %s: %w", c.rank, p, addr, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	tc := conn.(*net.TCPConn)
	if err := c.greetDialed(ctx, tc, key, p); err != nil {
		tc.Close()
		return fmt.Errorf("comm: rank %d handshake with rank %d at %s: %w", c.rank, p, addr, err)
	}
	c.peers[p] = newPeer(c, p, tc)
	return nil
}

func (c *Comm) greetDialed(ctx context.Context, conn *net.TCPConn, key []byte, p int) error {
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(earliest(deadline, time.Now().Add(handshakeLimit)))
	defer conn.SetDeadline(time.Time{})
	setSocketOptions(conn)
	h, err := dialHello(conn, key, c.self(), p)
	if err != nil {
		return err
	}
	return c.checkHello(h)
}

func (c *Comm) checkHello(h hello) error {
	switch {
	case h.version != wireVersion:
		return fmt.Errorf("rank %d speaks protocol version %d, this rank %d (different gotrain binaries?)", h.rank, h.version, wireVersion)
	case h.size != c.size:
		return fmt.Errorf("rank %d has world size %d, this rank %d", h.rank, h.size, c.size)
	case h.name != c.name:
		return fmt.Errorf("rank %d is in communicator %q, this rank in %q", h.rank, h.name, c.name)
	}
	return nil
}

// maxHello bounds a hello, challenge or refusal payload (fixed fields plus
// a name or a reason).
const maxHello = 4096

// errNoProof is the acceptor's verdict on a hello whose proof is wrong.
var errNoProof = errors.New("the hello does not prove the job secret (a process of another job, or one started with a different job secret)")

// transcript is what both proofs of a hello cover.
func transcript(dialer, acceptor, size int, name string, acceptorNonce, dialerNonce []byte) [][]byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, uint32(dialer))
	b = binary.LittleEndian.AppendUint32(b, uint32(acceptor))
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	return [][]byte{b, acceptorNonce, dialerNonce}
}

// acceptHello runs the acceptor's side on conn (under the caller's
// deadline): challenge, check the dialer's hello and proof, then answer with
// self's hello and proof. check vets the dialer's claims once its proof
// holds; a refusal says why before the error returns.
func acceptHello(conn net.Conn, key []byte, self hello, check func(hello) error) (hello, error) {
	na, err := comm.NewNonce()
	if err != nil {
		return hello{}, err
	}
	challenge := binary.LittleEndian.AppendUint32(nil, self.version)
	if err := writeFrame(conn, frameChallenge, append(challenge, na...)); err != nil {
		return hello{}, err
	}
	typ, p, err := readFrame(conn)
	if err != nil {
		return hello{}, err
	}
	if typ != frameHello {
		return hello{}, fmt.Errorf("the first frame is of type %d, not a hello", typ)
	}
	h, err := parseHello(p)
	if err != nil {
		refuse(conn, err)
		return hello{}, err
	}
	if h.version != self.version {
		err := fmt.Errorf("rank %d speaks protocol version %d, rank %d version %d (different gotrain binaries?)", h.rank, h.version, self.rank, self.version)
		refuse(conn, err)
		return hello{}, err
	}
	tr := transcript(h.rank, self.rank, h.size, h.name, na, h.nonce)
	if !hmac.Equal(h.proof, comm.Proof(key, "dialer", tr...)) {
		refuse(conn, errNoProof)
		return hello{}, errNoProof
	}
	if err := check(h); err != nil {
		refuse(conn, err)
		return hello{}, err
	}
	self.proof = comm.Proof(key, "acceptor", tr...)
	return h, writeFrame(conn, frameHello, self.payload())
}

// dialHello runs the dialer's side on conn (under the caller's deadline)
// toward rank want, and returns the acceptor's hello once it proved the
// key.
func dialHello(conn net.Conn, key []byte, self hello, want int) (hello, error) {
	typ, p, err := readFrame(conn)
	if err != nil {
		return hello{}, err
	}
	if typ != frameChallenge || len(p) != 4+comm.NonceSize {
		return hello{}, fmt.Errorf("the listener published as rank %d's did not open with a challenge (frame type %d, %d bytes): it is not a gotrain rank of this version", want, typ, len(p))
	}
	if v := binary.LittleEndian.Uint32(p); v != self.version {
		return hello{}, fmt.Errorf("rank %d speaks protocol version %d, this rank %d (different gotrain binaries?)", want, v, self.version)
	}
	na := p[4:]
	if self.nonce, err = comm.NewNonce(); err != nil {
		return hello{}, err
	}
	tr := transcript(self.rank, want, self.size, self.name, na, self.nonce)
	self.proof = comm.Proof(key, "dialer", tr...)
	if err := writeFrame(conn, frameHello, self.payload()); err != nil {
		return hello{}, err
	}
	typ, p, err = readFrame(conn)
	if err != nil {
		return hello{}, err
	}
	switch typ {
	case frameRefuse:
		return hello{}, fmt.Errorf("rank %d refused this rank's hello: %s", want, p)
	case frameHello:
	default:
		return hello{}, fmt.Errorf("rank %d answered the hello with a frame of type %d", want, typ)
	}
	h, err := parseHello(p)
	if err != nil {
		return hello{}, err
	}
	if h.rank != want {
		return hello{}, fmt.Errorf("the address rank %d published answered as rank %d", want, h.rank)
	}
	if !hmac.Equal(h.proof, comm.Proof(key, "acceptor", tr...)) {
		return hello{}, fmt.Errorf("the listener published as rank %d's did not prove the job secret: it is not this job's rank %d (a foreign process at that address, or a rank started with a different job secret)", want, want)
	}
	return h, nil
}

// refuse tells the other side why its hello failed; the connection is
// closed right after, so errors are moot.
func refuse(conn net.Conn, why error) {
	msg := why.Error()
	if len(msg) > maxHello {
		msg = msg[:maxHello]
	}
	writeFrame(conn, frameRefuse, []byte(msg))
}

func writeFrame(conn net.Conn, typ frameType, p []byte) error {
	var hb [headerSize]byte
	header{typ: typ, plen: uint32(len(p))}.encode(&hb)
	_, err := conn.Write(append(hb[:], p...))
	return err
}

// readFrame reads one handshake frame; its payload is at most maxHello
// bytes, checked before anything is allocated for it.
func readFrame(conn net.Conn) (frameType, []byte, error) {
	var hb [headerSize]byte
	h, err := readHeader(conn, &hb)
	if err != nil {
		return 0, nil, err
	}
	if h.plen > maxHello {
		return 0, nil, fmt.Errorf("a handshake frame of %d bytes (at most %d); not a gotrain peer", h.plen, maxHello)
	}
	p := make([]byte, h.plen)
	if _, err := io.ReadFull(conn, p); err != nil {
		return 0, nil, err
	}
	return h.typ, p, nil
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
