package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Store is the rendezvous key/value store every rank reaches on rank 0. It
// carries the little data ranks must agree on before they can talk to each
// other directly (listening addresses, NCCL unique ids) and whole-world
// barriers. Every call blocks until done or until ctx's deadline (the
// store's default timeout when ctx has none). A Store is safe for concurrent
// use.
type Store interface {
	// Rank and Size are this process's rank and the world size it joined.
	Rank() int
	Size() int
	// AdvertiseHost is the host (IP address or name) other ranks can reach
	// this process at: this end of its connection to the store, i.e. the
	// interface that reaches MASTER_ADDR ("127.0.0.1" when MASTER_ADDR is
	// loopback). When that end is a loopback address but MASTER_ADDR is not
	// (a master host whose /etc/hosts maps its own name to 127.0.1.1), it is
	// MASTER_ADDR itself, which every rank can reach.
	AdvertiseHost() string

	// Set stores value under key, replacing any earlier value.
	Set(ctx context.Context, key string, value []byte) error
	// Get returns key's value, waiting until some rank sets it.
	Get(ctx context.Context, key string) ([]byte, error)
	// Add adds delta to the decimal counter under key (absent counts as 0)
	// and returns the new value.
	Add(ctx context.Context, key string, delta int64) (int64, error)
	// Wait returns once every key is set.
	Wait(ctx context.Context, keys ...string) error
	// Barrier returns once all Size ranks called Barrier with name. A name
	// may be reused once the previous barrier of that name released.
	Barrier(ctx context.Context, name string) error

	// Close disconnects; on rank 0 it also stops the server, so rank 0
	// should close last (after a final Barrier).
	Close() error
}

// RendezvousOptions say how to reach the store and what to agree on.
type RendezvousOptions struct {
	Rank, Size int
	// Addr and Port are MASTER_ADDR and MASTER_PORT: where rank 0 serves the
	// store and every rank connects.
	Addr string
	Port int
	// Timeout bounds the rendezvous and is the store's default timeout for
	// later calls; 0 means DefaultTimeout.
	Timeout time.Duration
	// ConfigHash, when not empty, must be equal on every rank (e.g. a hash
	// of the training config and the binary version); a mismatch fails the
	// rendezvous on every rank.
	ConfigHash string
	// Listener, on rank 0 only, is served instead of listening on
	// Addr:Port, for callers that bound the port already (tests use
	// 127.0.0.1:0). Other ranks dial Addr:Port.
	Listener net.Listener
}

// Rendezvous starts the store server on rank 0, connects this rank to it
// (retrying while rank 0 is still starting) and waits until all Size ranks
// joined with the same world size and config hash. When a rank never
// arrives, the error names the missing ranks on every rank that did.
func Rendezvous(ctx context.Context, o RendezvousOptions) (Store, error) {
	if o.Size < 1 {
		return nil, fmt.Errorf("rendezvous: WORLD_SIZE is %d; it must be at least 1", o.Size)
	}
	if o.Rank < 0 || o.Rank >= o.Size {
		return nil, fmt.Errorf("rendezvous: RANK %d is outside [0, %d) for WORLD_SIZE %d", o.Rank, o.Size, o.Size)
	}
	if o.Addr == "" && o.Listener == nil {
		return nil, errors.New("rendezvous: MASTER_ADDR is empty; set it to rank 0's host name or address")
	}
	if o.Port < 0 || o.Port > 65535 || (o.Port == 0 && o.Listener == nil) {
		return nil, fmt.Errorf("rendezvous: MASTER_PORT %d is not a port number in [1, 65535]", o.Port)
	}
	if o.Listener != nil && o.Rank != 0 {
		return nil, fmt.Errorf("rendezvous: rank %d was given a listener; only rank 0 serves the store", o.Rank)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Rank 0 reaches its own server through MASTER_ADDR like everyone
	// else, so its end of the connection is an interface peers can reach.
	host, port := o.Addr, o.Port
	var srv *storeServer
	if o.Rank == 0 {
		ln := o.Listener
		if ln == nil {
			var err error
			if ln, err = listenStore(o.Addr, o.Port); err != nil {
				return nil, err
			}
		}
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			port = a.Port
			if host == "" {
				host = a.IP.String()
			}
		}
		srv = newStoreServer(ln, o.Size)
	}
	cl, err := dialStore(ctx, host, port, o.Rank, o.Size, timeout)
	if err != nil {
		if srv != nil {
			srv.close()
		}
		return nil, err
	}
	cl.server = srv
	if err := cl.join(ctx, o.ConfigHash, timeout); err != nil {
		cl.server = nil
		cl.Close()
		if srv != nil {
			srv.drain(joinDrain)
			srv.close()
		}
		return nil, err
	}
	return cl, nil
}

// joinDrain is how long rank 0 keeps serving after a failed rendezvous so
// every other rank receives the same explanation.
const joinDrain = 2 * time.Second

// listenStore binds MASTER_PORT: on the loopback address itself when
// MASTER_ADDR is loopback (nothing outside the host needs it), otherwise on
// every interface, because MASTER_ADDR may name this host through an address
// it cannot bind (a NAT or a load balancer).
func listenStore(addr string, port int) (net.Listener, error) {
	host := ""
	if isLoopbackHost(addr) {
		host = addr
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank 0 cannot serve the store on MASTER_PORT %d: %w (is another job using it?)", port, err)
	}
	return ln, nil
}

// isLoopbackHost reports whether host is "localhost" or a loopback IP
// literal.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// advertiseHost picks the host peers should dial for a process whose store
// connection left from local (see Store.AdvertiseHost).
func advertiseHost(local net.IP, master string) string {
	if local.IsLoopback() && !isLoopbackHost(master) && master != "" {
		return master
	}
	return local.String()
}

// callDeadline is ctx's deadline, or now+def when it has none.
func callDeadline(ctx context.Context, def time.Duration) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(def)
}

// roundDuration prints waits the way users set them (5m0s, 1.5s, 300ms),
// not with the milliseconds lost between computing a deadline and sending
// it.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}
