package tcp

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gotrain/gotrain/comm"
)

// peer is this rank's connection to one other rank: a writer goroutine
// draining an unbounded queue of frames (so enqueueing never blocks the
// ring) and a reader goroutine filling at most recvSlots receive buffers.
type peer struct {
	c    *Comm
	rank int
	conn *net.TCPConn

	qmu   sync.Mutex
	queue []outFrame
	spare []outFrame       // the writer's previous batch, reused
	wake  chan struct{}    // capacity 1: the queue grew
	whdr  [headerSize]byte // the writer's header scratch

	frames     chan inFrame  // received data frames, in order
	free       chan []byte   // receive buffers; recvSlots circulate
	bye        atomic.Bool   // the peer closed its Comm cleanly
	readerDone chan struct{} // closed when the reader stops; readErr says why
	readErr    error
	writerDone chan struct{}
}

// outFrame is one data frame to send, or (done != nil) a marker the writer
// closes once every frame queued before it has been written.
type outFrame struct {
	hdr     header
	payload []byte
	done    chan struct{}
}

type inFrame struct {
	hdr     header
	payload []byte
}

func newPeer(c *Comm, rank int, conn *net.TCPConn) *peer {
	p := &peer{
		c:          c,
		rank:       rank,
		conn:       conn,
		wake:       make(chan struct{}, 1),
		frames:     make(chan inFrame, recvSlots),
		free:       make(chan []byte, recvSlots),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	for range recvSlots {
		p.free <- nil // allocated on first use
	}
	return p
}

func (p *peer) enqueue(f outFrame) {
	p.qmu.Lock()
	p.queue = append(p.queue, f)
	p.qmu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take hands the writer everything queued so far.
func (p *peer) take() []outFrame {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	batch := p.queue
	clear(p.spare)
	p.queue, p.spare = p.spare[:0], batch
	return batch
}

// release returns a receive buffer after its payload was consumed.
func (p *peer) release(buf []byte) { p.free <- buf }

// writeLoop sends queued frames, a heartbeat whenever the connection was
// idle for Comm.heartbeat, and finally the abort or bye frame.
func (p *peer) writeLoop() {
	c := p.c
	defer c.wg.Done()
	defer close(p.writerDone)
	timer := time.NewTimer(c.heartbeat)
	defer timer.Stop()
	for {
		batch := p.take()
		if len(batch) == 0 {
			select {
			case <-p.wake:
			case <-timer.C:
				if err := p.write(header{typ: frameHeartbeat}, nil); err != nil {
					p.writeFailed(err)
					return
				}
				timer.Reset(c.heartbeat)
			case <-c.aborted:
				p.farewell()
				return
			case <-c.closing:
				p.farewell()
				return
			}
			continue
		}
		for _, f := range batch {
			select {
			case <-c.aborted:
				p.farewell()
				return
			default:
			}
			if f.done != nil {
				close(f.done)
				continue
			}
			if err := p.write(f.hdr, f.payload); err != nil {
				p.writeFailed(err)
				return
			}
		}
		timer.Reset(c.heartbeat)
	}
}

func (p *peer) write(h header, payload []byte) error {
	h.plen = uint32(len(payload))
	h.encode(&p.whdr)
	if len(payload) == 0 {
		_, err := p.conn.Write(p.whdr[:])
		return err
	}
	bufs := net.Buffers{p.whdr[:], payload}
	_, err := bufs.WriteTo(p.conn)
	return err
}

// farewell sends the abort frame (when the Comm failed) or the bye frame
// (when it is closing), then half-closes so the peer reads everything and
// then EOF. A killed Comm sends nothing, like a dead process.
func (p *peer) farewell() {
	c := p.c
	if c.killed.Load() {
		return
	}
	p.conn.SetWriteDeadline(time.Now().Add(abortFlush))
	if cs := c.failure(); cs != nil {
		p.write(header{typ: frameAbort}, cs.payload())
	} else {
		p.write(header{typ: frameBye}, nil)
	}
	p.conn.CloseWrite()
}

func (p *peer) writeFailed(err error) {
	if p.quiet() {
		return
	}
	p.c.fail(cause{what: causeLost, rank: p.rank, reporter: p.c.rank, err: describeNetErr(err, p.c.peerTimeout)})
}

// quiet reports whether a connection error is expected: this Comm is
// closing or was killed.
func (p *peer) quiet() bool {
	select {
	case <-p.c.closing:
		return true
	default:
	}
	return p.c.killed.Load()
}

// readLoop reads frames until the connection ends. An error on a peer that
// did not say bye aborts the Comm with that peer as the lost rank.
func (p *peer) readLoop() {
	c := p.c
	defer c.wg.Done()
	var hb [headerSize]byte
	var err error
	for err == nil {
		err = p.readFrame(&hb)
	}
	p.readErr = err
	close(p.readerDone)
	if p.quiet() || p.bye.Load() {
		return // a call that still needs this peer fails in recv
	}
	c.fail(cause{what: causeLost, rank: p.rank, reporter: c.rank, err: describeNetErr(err, c.peerTimeout)})
}

// maxControl bounds an abort frame's payload (an error message).
const maxControl = 1 << 20

func (p *peer) readFrame(hb *[headerSize]byte) error {
	c := p.c
	p.setReadDeadline()
	h, err := readHeader(p.conn, hb)
	if err != nil {
		return err
	}
	switch h.typ {
	case frameHeartbeat:
		return nil
	case frameBye:
		p.bye.Store(true)
		return nil
	case frameAbort:
		if h.plen > maxControl {
			return fmt.Errorf("abort frame of %d bytes", h.plen)
		}
		buf := make([]byte, h.plen)
		if _, err := io.ReadFull(p.conn, buf); err != nil {
			return err
		}
		cs, err := parseCause(buf)
		if err != nil {
			return err
		}
		c.fail(cs)
		return nil
	case frameData:
		if int(h.plen) > c.seg {
			return fmt.Errorf("data frame of %d bytes exceeds the %d-byte segment (ranks configured differently?)", h.plen, c.seg)
		}
		var buf []byte
		select {
		case buf = <-p.free:
		case <-c.aborted:
			_, err := io.CopyN(io.Discard, p.conn, int64(h.plen)) // nobody will consume it
			return err
		case <-c.closing:
			_, err := io.CopyN(io.Discard, p.conn, int64(h.plen))
			return err
		}
		if cap(buf) < int(h.plen) {
			buf = alignedBytes(c.seg) // sized for any later frame too
		}
		buf = buf[:h.plen]
		p.setReadDeadline() // waiting for a free buffer may have taken long
		if _, err := io.ReadFull(p.conn, buf); err != nil {
			return err
		}
		p.frames <- inFrame{hdr: h, payload: buf} // never blocks: one slot per buffer
		return nil
	}
	return fmt.Errorf("unknown frame type %d (not a gotrain peer, or a different version)", h.typ)
}

// setReadDeadline allows PeerTimeout of silence; a peer that said bye no
// longer sends heartbeats, so its EOF is waited for without a limit.
func (p *peer) setReadDeadline() {
	if p.bye.Load() {
		p.conn.SetReadDeadline(time.Time{})
		return
	}
	p.conn.SetReadDeadline(time.Now().Add(p.c.peerTimeout))
}

// describeNetErr turns a connection error into the short reason users see.
func describeNetErr(err error, silence time.Duration) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("connection closed")
	case errors.Is(err, syscall.ECONNRESET):
		return errors.New("connection reset")
	case errors.Is(err, syscall.EPIPE):
		return errors.New("broken pipe")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &comm.PeerSilentError{Silence: silence}
	}
	return err
}
