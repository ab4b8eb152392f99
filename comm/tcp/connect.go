package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gotrain/gotrain/comm"
)

// handshakeLimit bounds how long an accepted connection may take to say
// hello, so a stray client cannot stall the setup.
const handshakeLimit = 10 * time.Second

func (c *Comm) addrKey(rank int) string { return fmt.Sprintf("gotrain/tcp/%s/addr/%d", c.name, rank) }

// connect builds the full mesh: listen on an ephemeral port, publish
// host:port, dial every lower rank and accept every higher one, each
// connection opened by a hello exchange that checks rank, world size and
// communicator name.
func (c *Comm) connect(ctx context.Context, store comm.Store, host string) error {
	bind := ""
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		bind = host
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(bind, "0"))
	if err != nil {
		return fmt.Errorf("comm: rank %d cannot listen for peers: %w", c.rank, err)
	}
	defer ln.Close()
	addr := net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	if err := store.Set(ctx, c.addrKey(c.rank), []byte(addr)); err != nil {
		return fmt.Errorf("comm: rank %d could not publish its address: %w", c.rank, err)
	}

	accepted := make(chan error, 1)
	go func() { accepted <- c.acceptPeers(ctx, ln.(*net.TCPListener)) }()
	for p := range c.rank {
		if err := c.dialPeer(ctx, store, p); err != nil {
			ln.Close() // ends acceptPeers
			<-accepted
			return err
		}
	}
	return <-accepted
}

func (c *Comm) acceptPeers(ctx context.Context, ln *net.TCPListener) error {
	deadline, _ := ctx.Deadline()
	ln.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { ln.SetDeadline(time.Now()) })
	defer stop()
	start := time.Now()
	for got := c.size - 1 - c.rank; got > 0; {
		conn, err := ln.AcceptTCP()
		if err != nil {
			var missing []int
			for r := c.rank + 1; r < c.size; r++ {
				if c.peers[r] == nil {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("comm: ranks %v never connected to rank %d within %s: %v",
				missing, c.rank, time.Since(start).Round(time.Millisecond), err)
		}
		rank, err := c.greetAccepted(conn, deadline)
		if err != nil {
			conn.Close() // not a peer of this communicator; keep waiting for the real ones
			continue
		}
		c.peers[rank] = newPeer(c, rank, conn)
		got--
	}
	return nil
}

// greetAccepted reads a dialer's hello, checks it and answers with ours.
func (c *Comm) greetAccepted(conn *net.TCPConn, deadline time.Time) (int, error) {
	conn.SetDeadline(earliest(deadline, time.Now().Add(handshakeLimit)))
	defer conn.SetDeadline(time.Time{})
	h, err := readHello(conn)
	if err != nil {
		return 0, err
	}
	if h.rank <= c.rank || h.rank >= c.size || c.peers[h.rank] != nil {
		return 0, fmt.Errorf("unexpected hello from rank %d", h.rank)
	}
	if err := c.checkHello(h); err != nil {
		return 0, err
	}
	setSocketOptions(conn)
	return h.rank, writeHello(conn, hello{version: wireVersion, rank: c.rank, size: c.size, name: c.name})
}

func (c *Comm) dialPeer(ctx context.Context, store comm.Store, p int) error {
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
	if err := c.greetDialed(ctx, tc, p); err != nil {
		tc.Close()
		return fmt.Errorf("comm: rank %d handshake with rank %d at %s: %w", c.rank, p, addr, err)
	}
	c.peers[p] = newPeer(c, p, tc)
	return nil
}

func (c *Comm) greetDialed(ctx context.Context, conn *net.TCPConn, p int) error {
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	setSocketOptions(conn)
	if err := writeHello(conn, hello{version: wireVersion, rank: c.rank, size: c.size, name: c.name}); err != nil {
		return err
	}
	h, err := readHello(conn)
	if err != nil {
		return err
	}
	if h.rank != p {
		return fmt.Errorf("the address rank %d published answered as rank %d", p, h.rank)
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

// maxHello bounds a hello payload (fixed fields plus a name).
const maxHello = 4096

func writeHello(conn net.Conn, h hello) error {
	p := h.payload()
	var hb [headerSize]byte
	header{typ: frameHello, plen: uint32(len(p))}.encode(&hb)
	_, err := conn.Write(append(hb[:], p...))
	return err
}

func readHello(conn net.Conn) (hello, error) {
	var hb [headerSize]byte
	h, err := readHeader(conn, &hb)
	if err != nil {
		return hello{}, err
	}
	if h.typ != frameHello || h.plen > maxHello {
		return hello{}, errors.New("first frame is not a hello")
	}
	p := make([]byte, h.plen)
	if _, err := io.ReadFull(conn, p); err != nil {
		return hello{}, err
	}
	return parseHello(p)
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
