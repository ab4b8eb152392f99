package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultMetricsAddr is where local rank 0 serves /metrics unless told
// otherwise; local rank r uses the port plus r.
const DefaultMetricsAddr = "127.0.0.1:9400"

// MetricsOff is the address value that disables the metrics server.
const MetricsOff = "off"

// PortBusyError says the metrics address was already taken. It is a
// warning: the caller reports it and trains on without a metrics server.
type PortBusyError struct {
	Addr string
	Err  error
}

func (e *PortBusyError) Error() string {
	return fmt.Sprintf("metrics: %s is in use, serving no /metrics: %v", e.Addr, e.Err)
}

func (e *PortBusyError) Unwrap() error { return e.Err }

// MetricsAddr is the listen address of local rank localRank given the
// configured base: "" means DefaultMetricsAddr, "off" gives "" (no server),
// a bare port means 127.0.0.1:PORT, and otherwise base is HOST:PORT
// (0.0.0.0:PORT exposes every interface). Port 0 stays 0 on every rank
// (the kernel picks); any other port becomes PORT+localRank.
func MetricsAddr(base string, localRank int) (string, error) {
	switch base {
	case MetricsOff:
		return "", nil
	case "":
		base = DefaultMetricsAddr
	}
	if localRank < 0 {
		return "", fmt.Errorf("metrics address %q: negative local rank %d", base, localRank)
	}
	host, portStr, err := net.SplitHostPort(base)
	if err != nil {
		if _, perr := strconv.Atoi(base); perr != nil {
			return "", fmt.Errorf("metrics address %q: want HOST:PORT, PORT or %q: %w", base, MetricsOff, err)
		}
		host, portStr = "127.0.0.1", base
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", fmt.Errorf("metrics address %q: bad port %q", base, portStr)
	}
	if port != 0 {
		port += localRank
		if port > 65535 {
			return "", fmt.Errorf("metrics address %q: port %d for local rank %d is above 65535", base, port, localRank)
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// Serve listens on addr and serves /metrics (this registry, gathered at
// most once per PromOptions.ScrapeInterval, at most
// PromOptions.MaxConcurrentScrapes scrapes at once) and /healthz ("ok")
// until ctx ends, then shuts the server down. It returns the bound
// address (the real port when addr asked for port 0). addr "" or "off"
// serves nothing and returns "", nil. A taken address is a *PortBusyError.
func (p *Prometheus) Serve(ctx context.Context, addr string) (string, error) {
	if addr == "" || addr == MetricsOff {
		return "", nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return "", &PortBusyError{Addr: addr, Err: err}
		}
		return "", fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	// ContinueOnError: one failing collector must not hide every other
	// metric of a training run.
	mux.Handle("/metrics", newScrapeCache(promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}),
		p.scrapeInterval, p.maxScrapes))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) // returns http.ErrServerClosed after Shutdown
	go func() {
		<-ctx.Done()
		// A scrape in flight gets a moment to finish; training is over.
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	return ln.Addr().String(), nil
}
