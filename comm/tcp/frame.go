package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// Every message on a peer connection is a frame: a fixed 32-byte
// little-endian header, then plen payload bytes.
//
//	[0] type  [1] kind  [2] dtype  [3] op  [4:8] plen
//	[8:16] seq  [16:24] count  [24:28] aux  [28:32] magic
//
// Data frames carry one segment of a collective; seq, kind, dtype, op, count
// (message elements) and aux (broadcast root) describe the call that sent
// it, so a receiver in a different call reports the disagreement instead of
// reducing garbage. The magic catches a desynchronized stream.
const (
	headerSize  = 32
	frameMagic  = 0x4e525447 // "GTRN"
	wireVersion = 2          // 2: the hello proves the job's peer key
)

type frameType uint8

const (
	frameHello     frameType = iota + 1 // payload: version, rank, size, nonce, proof, name
	frameData                           // payload: one segment
	frameHeartbeat                      // no payload; proof of life when idle
	frameAbort                          // payload: the abort cause
	frameBye                            // no payload; the sender closed its Comm
	frameChallenge                      // payload: version, nonce; an accepted connection's first frame
	frameRefuse                         // payload: why the hello was refused
)

type header struct {
	typ   frameType
	kind  comm.Kind
	dtype backend.DType
	op    comm.Op
	plen  uint32
	seq   uint64
	count uint64
	aux   int32
}

func (h header) encode(b *[headerSize]byte) {
	b[0], b[1], b[2], b[3] = byte(h.typ), byte(h.kind), byte(h.dtype), byte(h.op)
	binary.LittleEndian.PutUint32(b[4:], h.plen)
	binary.LittleEndian.PutUint64(b[8:], h.seq)
	binary.LittleEndian.PutUint64(b[16:], h.count)
	binary.LittleEndian.PutUint32(b[24:], uint32(h.aux))
	binary.LittleEndian.PutUint32(b[28:], frameMagic)
}

var errBadMagic = errors.New("stream out of sync (bad frame magic); not a gotrain peer, or a different version")

func readHeader(r io.Reader, b *[headerSize]byte) (header, error) {
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return header{}, err
	}
	if binary.LittleEndian.Uint32(b[28:]) != frameMagic {
		return header{}, errBadMagic
	}
	return header{
		typ:   frameType(b[0]),
		kind:  comm.Kind(b[1]),
		dtype: backend.DType(b[2]),
		op:    comm.Op(b[3]),
		plen:  binary.LittleEndian.Uint32(b[4:]),
		seq:   binary.LittleEndian.Uint64(b[8:]),
		count: binary.LittleEndian.Uint64(b[16:]),
		aux:   int32(binary.LittleEndian.Uint32(b[24:])),
	}, nil
}

// describe names the call a data header belongs to, for mismatch errors.
func (h header) describe() string {
	s := h.kind.String()
	switch h.kind {
	case comm.KindAllReduce, comm.KindReduceScatter:
		s += "(" + h.op.String() + ")"
	case comm.KindBroadcast:
		s += fmt.Sprintf("(root %d)", h.aux)
	}
	if h.kind != comm.KindBarrier {
		s += fmt.Sprintf(" of %d %s", h.count, h.dtype)
	}
	return fmt.Sprintf("%s #%d", s, h.seq)
}

// sameCall reports whether a received data header belongs to the call the
// receiver is in.
func (h header) sameCall(want header) bool {
	return h.typ == frameData && h.seq == want.seq && h.kind == want.kind && h.dtype == want.dtype &&
		h.op == want.op && h.count == want.count && h.aux == want.aux
}

// hello is the frame each side of a new connection sends to say who it is
// and prove it holds the job's peer key (connect.go). The acceptor's hello
// carries no nonce of its own (it sent it in the challenge): zeros.
type hello struct {
	version    uint32
	rank, size int
	nonce      []byte // comm.NonceSize bytes
	proof      []byte // comm.MACSize bytes
	name       string
}

// helloFixed is the size of a hello payload before the name.
const helloFixed = 12 + comm.NonceSize + comm.MACSize

func (h hello) payload() []byte {
	b := binary.LittleEndian.AppendUint32(nil, h.version)
	b = binary.LittleEndian.AppendUint32(b, uint32(h.rank))
	b = binary.LittleEndian.AppendUint32(b, uint32(h.size))
	b = append(b, fixedLen(h.nonce, comm.NonceSize)...)
	b = append(b, fixedLen(h.proof, comm.MACSize)...)
	return append(b, h.name...)
}

// fixedLen is b cut or zero-padded to n bytes.
func fixedLen(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

func parseHello(p []byte) (hello, error) {
	if len(p) < helloFixed {
		return hello{}, fmt.Errorf("short hello (%d bytes; protocol version %d needs at least %d)", len(p), wireVersion, helloFixed)
	}
	return hello{
		version: binary.LittleEndian.Uint32(p),
		rank:    int(int32(binary.LittleEndian.Uint32(p[4:]))),
		size:    int(int32(binary.LittleEndian.Uint32(p[8:]))),
		nonce:   p[12 : 12+comm.NonceSize],
		proof:   p[12+comm.NonceSize : helloFixed],
		name:    string(p[helloFixed:]),
	}, nil
}

// Abort causes on the wire: what happened, to or by which rank, who saw it,
// and the text of the error.
const (
	causeLost    uint8 = 1 // rank was lost; reporter saw it
	causeAborted uint8 = 2 // rank aborted
)

type cause struct {
	what     uint8
	rank     int
	reporter int
	err      error
}

func (c cause) payload() []byte {
	b := []byte{c.what}
	b = binary.LittleEndian.AppendUint32(b, uint32(c.rank))
	b = binary.LittleEndian.AppendUint32(b, uint32(c.reporter))
	return append(b, c.err.Error()...)
}

func parseCause(p []byte) (cause, error) {
	if len(p) < 9 || (p[0] != causeLost && p[0] != causeAborted) {
		return cause{}, errors.New("malformed abort frame")
	}
	return cause{
		what:     p[0],
		rank:     int(int32(binary.LittleEndian.Uint32(p[1:]))),
		reporter: int(int32(binary.LittleEndian.Uint32(p[5:]))),
		err:      errors.New(string(p[9:])),
	}, nil
}

// callError is the error a call of kind op on rank self returns once the
// Comm failed with this cause.
func (c cause) callError(op comm.Kind, self int) error {
	if c.what == causeLost {
		by := c.reporter
		if by == self {
			by = -1
		}
		return &comm.PeerLostError{Rank: c.rank, Op: op, ReportedBy: by, Err: c.err}
	}
	return &comm.AbortedError{Rank: c.rank, Op: op, Reason: c.err}
}
