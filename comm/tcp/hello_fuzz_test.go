package tcp

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gotrain/gotrain/comm"
)

// FuzzPeerHello feeds arbitrary bytes to either side of the peer hello: as
// the dialer's frames to an accepting rank, or as the acceptor's frames to a
// dialing rank. Neither side may panic, wait past its deadline, read a
// frame larger than maxHello, or accept the other side: the bytes cannot
// hold a proof over the fresh nonce this side just made.
func FuzzPeerHello(f *testing.F) {
	frame := func(typ frameType, p []byte) []byte {
		var hb [headerSize]byte
		header{typ: typ, plen: uint32(len(p))}.encode(&hb)
		return append(hb[:], p...)
	}
	nonce := bytes.Repeat([]byte{7}, comm.NonceSize)
	h1 := hello{version: wireVersion, rank: 1, size: 2, nonce: nonce, name: "world"}.payload()
	h0 := hello{version: wireVersion, rank: 0, size: 2, name: "world"}.payload()
	challenge := append([]byte{wireVersion, 0, 0, 0}, nonce...)
	f.Add(true, frame(frameHello, h1))
	f.Add(true, frame(frameHello, h1[:20]))
	f.Add(true, frame(frameData, nil))
	f.Add(true, frame(frameHello, hello{version: 1, rank: 1, size: 2, name: "world"}.payload()))
	f.Add(false, append(frame(frameChallenge, challenge), frame(frameHello, h0)...))
	f.Add(false, append(frame(frameChallenge, challenge), frame(frameRefuse, []byte("no"))...))
	f.Add(false, frame(frameChallenge, challenge[:7]))
	f.Add(false, []byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
	f.Add(false, func() []byte { b := frame(frameHello, nil); b[4], b[5], b[6], b[7] = 0xff, 0xff, 0xff, 0x7f; return b }())
	key := comm.Proof([]byte("fuzz secret"), "peer key")
	f.Fuzz(func(t *testing.T, accepting bool, stream []byte) {
		local, remote := net.Pipe()
		defer local.Close()
		defer remote.Close()
		const limit = 200 * time.Millisecond
		local.SetDeadline(time.Now().Add(limit))
		go io.Copy(io.Discard, remote)
		go func() {
			// Then EOF, so a hello that wants more fails at once; the
			// deadline bounds the rest.
			remote.Write(stream)
			remote.Close()
		}()
		start := time.Now()
		var err error
		if accepting {
			_, err = acceptHello(local, key, hello{version: wireVersion, rank: 0, size: 2, name: "world"}, func(hello) error { return nil })
		} else {
			_, err = dialHello(local, key, hello{version: wireVersion, rank: 1, size: 2, name: "world"}, 0)
		}
		if err == nil {
			t.Fatalf("accepted a peer from %d bytes without the key (accepting %v)", len(stream), accepting)
		}
		if took := time.Since(start); took > limit+2*time.Second {
			t.Fatalf("the hello took %v, past its %v deadline", took, limit)
		}
	})
}
