package comm

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
)

// FuzzStoreServeConn feeds arbitrary bytes to a store connection, either
// from its first byte (an unauthenticated client) or after a valid
// handshake (a rank gone wrong). The server must never panic, must drop an
// unauthenticated connection by the handshake timeout and an authenticated
// one as soon as its client leaves (every blocked request ends with it),
// and must not allocate much beyond what it was sent.
func FuzzStoreServeConn(f *testing.F) {
	req := func(op uint8, fields func(*encoder)) []byte {
		e := newEncoder()
		e.u8(op)
		e.u64(7)
		fields(e)
		return e.finish()
	}
	f.Add(false, []byte(storeMagic))
	f.Add(false, make([]byte, NonceSize+MACSize))
	f.Add(false, req(opSet, func(e *encoder) { e.str("gotrain/tcp/world/addr/0"); e.bytes([]byte("10.0.0.9:1")) }))
	f.Add(true, req(opWait, func(e *encoder) { e.i64(64 << 20); e.dur(time.Second) }))
	f.Add(true, req(opJoin, func(e *encoder) {
		e.i64(1)
		e.i64(2)
		e.i64(1)
		e.str("lr")
		e.str("0.1")
		e.dur(time.Second)
	}))
	f.Add(true, req(opJoin, func(e *encoder) { e.i64(0); e.i64(2); e.i64(1 << 40); e.dur(time.Second) }))
	f.Add(true, append(req(opSet, func(e *encoder) { e.str("k"); e.bytes([]byte("v")) }), req(opGet, func(e *encoder) { e.str("k"); e.dur(time.Hour) })...))
	f.Add(true, req(opAdd, func(e *encoder) { e.str("k"); e.i64(-1) }))
	f.Add(true, req(opBarrier, func(e *encoder) { e.str("b"); e.i64(5); e.dur(time.Hour) }))
	f.Add(true, []byte{0xff, 0xff, 0xff, 0x03, 1})
	f.Add(true, []byte{9, 0, 0, 0, 99, 1, 2, 3, 4, 5, 6, 7, 8})
	key := storeKey(testSecret, "job-A")
	// Short, so that the engine's minimization of new inputs (which runs
	// each candidate) stays quick.
	const authTimeout = 5 * time.Millisecond
	f.Fuzz(func(t *testing.T, authed bool, stream []byte) {
		alloc := allocatedBy(func() {
			s := newStoreServer(neverListener{}, 2, serverConfig{key: key, jobID: "job-A", authTimeout: authTimeout, maxPending: 4})
			defer s.close()
			client, server := net.Pipe()
			defer client.Close()
			s.mu.Lock()
			s.pending.Admit(server)
			s.wg.Add(1)
			s.mu.Unlock()
			served := make(chan struct{})
			go func() { s.serveConn(server); close(served) }()

			client.SetDeadline(time.Now().Add(5 * time.Second))
			if authed {
				if err := clientHandshake(client, key, 1, "job-A", "fuzz", ""); err != nil {
					t.Fatalf("handshake: %v", err)
				}
			}
			go io.Copy(io.Discard, client)
			wrote := make(chan struct{})
			go func() { client.Write(stream); close(wrote) }()
			// Generous bounds: only a real hang, not a loaded machine,
			// should trip them.
			limit := authTimeout + 10*time.Second
			if authed {
				<-wrote
				client.Close() // the rank leaves: every handler must end
				limit = 10 * time.Second
			}
			select {
			case <-served:
			case <-time.After(limit):
				// Report without waiting for the stuck server (s.close
				// would wait for it too), with every goroutine's stack.
				buf := make([]byte, 1<<20)
				panic(fmt.Sprintf("the store still holds the connection %v after its client stopped (authed %v):\n%s",
					limit, authed, buf[:runtime.Stack(buf, true)]))
			}
			client.Close()
			<-wrote
		})
		if limit := uint64(4<<20 + 16*len(stream)); alloc > limit {
			t.Fatalf("%d bytes sent made the server allocate %d bytes", len(stream), alloc)
		}
	})
}
