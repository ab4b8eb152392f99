package comm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The store protocol: every message is a little-endian u32 body length
// followed by the body. A request body is op (u8), id (u64), then the op's
// fields; a response body is id (u64), status (u8), then either the result
// or, for statusErr, the error text. Strings and byte strings are a u32
// length then the bytes; integers are i64. Requests on one connection may be
// answered out of order (a blocking Get does not hold up a Set), so the id
// pairs them.
//
// Messages flow only after the handshake (store_auth.go), and every count
// in a request is checked against the bytes that follow it, so no request
// makes the server allocate more than the request's own length.
const (
	opJoin    uint8 = iota + 1 // rank, size, n, n × (field name, value), wait ms
	opSet                      // key, value
	opGet                      // key, wait ms → value
	opAdd                      // key, delta → new value
	opWait                     // n, n keys, wait ms
	opBarrier                  // name, rank, wait ms
)

const (
	statusOK  uint8 = 0
	statusErr uint8 = 1
)

// maxStoreMessage bounds a message. Only ranks that proved the job secret
// send messages at all; the bound keeps a confused one from making rank 0
// allocate gigabytes.
const maxStoreMessage = 64 << 20

// eagerMessage is the largest body read into a buffer sized from the
// header alone; longer bodies grow as their bytes arrive, so a header that
// promises more than is sent costs nothing.
const eagerMessage = 64 << 10

// encoder builds one message: a length placeholder, then the body.
type encoder struct{ b []byte }

func newEncoder() *encoder { return &encoder{b: make([]byte, 4, 64)} }

func (e *encoder) u8(v uint8)          { e.b = append(e.b, v) }
func (e *encoder) u64(v uint64)        { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) i64(v int64)         { e.u64(uint64(v)) }
func (e *encoder) str(v string)        { e.bytes([]byte(v)) }
func (e *encoder) dur(d time.Duration) { e.i64(d.Milliseconds()) }
func (e *encoder) bytes(v []byte) {
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(v)))
	e.b = append(e.b, v...)
}

// finish fills in the length and returns the whole message.
func (e *encoder) finish() []byte {
	binary.LittleEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

// decoder reads fields in order; the first short read sticks in err.
type decoder struct {
	b   []byte
	err error
}

var errShortMessage = errors.New("short store message")

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.err = errShortMessage
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) i64() int64 { return int64(d.u64()) }

func (d *decoder) bytes() []byte {
	v := d.take(4)
	if v == nil {
		return nil
	}
	return d.take(int(binary.LittleEndian.Uint32(v)))
}

func (d *decoder) str() string { return string(d.bytes()) }

// count reads an i64 element count and checks it against the bytes left:
// each element takes at least each bytes, so a count the message cannot
// hold fails here, before anything is allocated for it.
func (d *decoder) count(each int) int {
	n := d.i64()
	if d.err != nil {
		return 0
	}
	if n < 0 || n > int64(len(d.b)/each) {
		d.err = fmt.Errorf("store message claims %d elements but holds %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *decoder) dur() time.Duration { return time.Duration(d.i64()) * time.Millisecond }

// readMessage reads one length-prefixed body.
func readMessage(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > maxStoreMessage {
		return nil, fmt.Errorf("store message of %d bytes exceeds the %d-byte limit (not a gotrain peer?)", n, maxStoreMessage)
	}
	if n <= eagerMessage {
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	var body bytes.Buffer
	body.Grow(eagerMessage)
	if _, err := io.CopyN(&body, r, int64(n)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body.Bytes(), nil
}
