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
	// JobID is the job id this rank joined with (RendezvousOptions.JobID).
	JobID() string
	// PeerKey is the key the ranks of this job prove themselves with when
	// they connect to each other for purpose (comm/tcp's peer hello uses
	// "tcp/" + the communicator's name). It is derived from the job secret
	// and job id, equal on every rank, and different for every purpose, so
	// a proof made for one connection cannot be replayed on another.
	PeerKey(purpose string) []byte

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
	// Secret is the job's shared secret. Every connection to the store and
	// every connection between ranks proves knowledge of it (an HMAC over a
	// fresh nonce of the other side) before anything else is read, and the
	// store proves it back, so nobody without it can read or write a key,
	// join, or pass as a rank. It may be empty only when Addr is a loopback
	// address (tests, in-process worlds); it is then an empty key, which
	// anyone on the host can use.
	Secret []byte
	// JobID names the job (at most MaxJobIDLen bytes; may be empty). Rank 0's
	// store announces it before any proof, so a rank of another job on the
	// same port is refused with both names instead of a bare "wrong secret".
	JobID string
	// SecretHint, when not empty, ends the error of a rank the store refused:
	// where its secret came from and what likely differs.
	SecretHint string
	// Fields must agree on every rank (the resolved config, batch sizes,
	// sequence length, data files, version, ...). A disagreement fails the
	// rendezvous on every rank, naming each differing field with both values.
	Fields []Field
	// Warnf, when not nil, receives warnings worth a user's attention (rank 0
	// had to serve the store on every interface; rank 0's store refused a
	// rank, said at once, with the rank, its address and the reason).
	Warnf func(format string, args ...any)
	// Listener, on rank 0 only, is served instead of listening on
	// Addr:Port, for callers that bound the port already (tests use
	// 127.0.0.1:0). Other ranks dial Addr:Port.
	Listener net.Listener
}

// Rendezvous starts the store server on rank 0, connects this rank to it
// (retrying while rank 0 is still starting), proves the job secret, and
// waits until all Size ranks joined with the same world size and fields.
// When a rank never arrives, the error names the missing ranks on every
// rank that did; when the store refused a rank (another secret or job id)
// and it does not join within 30 seconds (half the Timeout, if shorter),
// the rendezvous fails on every rank naming it and the reason.
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
	if len(o.JobID) > MaxJobIDLen {
		return nil, fmt.Errorf("rendezvous: the job id is %d bytes long; at most %d are allowed", len(o.JobID), MaxJobIDLen)
	}
	if len(o.Secret) == 0 && !isLoopbackHost(o.Addr) {
		return nil, fmt.Errorf("rendezvous: no job secret for a store at MASTER_ADDR=%s, which other hosts can reach; start the ranks with gotrain launch, or give every rank the same GOTRAIN_JOB_SECRET", o.Addr)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	start := time.Now()
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
			if ln, err = listenStore(ctx, o.Addr, o.Port, o.Warnf); err != nil {
				return nil, err
			}
		}
		if a, ok := ln.Addr().(*net.TCPAddr); ok {
			port = a.Port
			if host == "" {
				host = a.IP.String()
			}
		}
		srv = newStoreServer(ln, o.Size, serverConfig{key: storeKey(o.Secret, o.JobID), jobID: o.JobID,
			refusalGrace: min(defaultRefusalGrace, timeout/2), warnf: o.Warnf})
	}
	cl, err := dialStore(ctx, host, port, o.Rank, o.Size, timeout, clientAuth{secret: o.Secret, jobID: o.JobID, hint: o.SecretHint})
	if err != nil {
		if srv != nil {
			srv.close()
		}
		return nil, err
	}
	cl.server = srv
	if err := cl.join(ctx, o.Fields, timeout); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			err = fmt.Errorf("rendezvous: rank %d stopped waiting for all %d ranks to join at %s after %s: %w",
				o.Rank, o.Size, cl.target, roundDuration(time.Since(start)), context.Cause(ctx))
		}
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

// listenStore binds MASTER_PORT on the interface MASTER_ADDR names, so the
// store is not offered on networks the job does not use. When MASTER_ADDR
// names no address of this host that other hosts can reach (NAT, a load
// balancer, or a host whose /etc/hosts maps its own name to 127.0.1.1), the
// interface peers arrive on cannot be known, so it serves every interface
// and says so through warnf: connections must still prove the job secret.
func listenStore(ctx context.Context, addr string, port int, warnf func(string, ...any)) (net.Listener, error) {
	var resolved []net.IP
	if !isLoopbackHost(addr) && net.ParseIP(addr) == nil {
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, addr)
		if err != nil {
			return nil, fmt.Errorf("rendezvous: rank 0 cannot resolve MASTER_ADDR %q: %w; set MASTER_ADDR to this host's name or address as the other hosts know it", addr, err)
		}
		for _, ip := range ips {
			resolved = append(resolved, ip.IP)
		}
	}
	host, warning := bindHost(addr, resolved, localIPs())
	if warning != "" && warnf != nil {
		warnf("%s", warning)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank 0 cannot serve the store on MASTER_PORT %d: %w (is another job using it?)", port, err)
	}
	return ln, nil
}

// bindHost picks the address rank 0's store listens on for MASTER_ADDR addr
// ("" for every interface, with a warning): addr itself when it is loopback
// or a local IP literal, else the first of resolved (addr's addresses) that
// is one of this host's non-loopback addresses local.
func bindHost(addr string, resolved, local []net.IP) (host, warning string) {
	if isLoopbackHost(addr) {
		return addr, ""
	}
	isLocal := func(ip net.IP) bool {
		for _, l := range local {
			if l.Equal(ip) {
				return true
			}
		}
		return false
	}
	if ip := net.ParseIP(addr); ip != nil {
		if isLocal(ip) {
			return addr, ""
		}
		resolved = []net.IP{ip}
	}
	for _, ip := range resolved {
		if !ip.IsLoopback() && isLocal(ip) {
			return ip.String(), ""
		}
	}
	return "", fmt.Sprintf("warning: MASTER_ADDR=%s is %v here, not an address other hosts reach this host at, so rank 0 serves the store on every interface (every connection must still prove the job secret); set MASTER_ADDR to this host's address on the training network to serve only there",
		addr, resolved)
}

// localIPs lists this host's interface addresses (none when they cannot be
// read: then the store serves every interface, with the warning).
func localIPs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
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
