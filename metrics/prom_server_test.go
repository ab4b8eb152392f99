package metrics

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
)

// envRequirePrometheus makes the tests that run promtool and a Prometheus
// server fail, instead of skip, when those binaries are missing (set in CI,
// which installs them).
const envRequirePrometheus = "GOTRAIN_REQUIRE_PROMETHEUS"

// lookTool finds a Prometheus binary on PATH, skipping the test without it
// unless CI requires it.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(envRequirePrometheus) == "1" {
			t.Fatalf("%s=1 but %s is not installed: %v", envRequirePrometheus, name, err)
		}
		t.Skipf("%s not installed (set %s=1 to require it)", name, envRequirePrometheus)
	}
	return path
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

func TestMetricsAddr(t *testing.T) {
	cases := []struct {
		base string
		rank int
		want string
	}{
		{"", 0, "127.0.0.1:9400"},
		{"", 3, "127.0.0.1:9403"},
		{"127.0.0.1:9400", 7, "127.0.0.1:9407"},
		{"0.0.0.0:9100", 1, "0.0.0.0:9101"},
		{":9100", 2, ":9102"},
		{"9500", 1, "127.0.0.1:9501"},
		{"[::1]:9400", 1, "[::1]:9401"},
		{"127.0.0.1:0", 5, "127.0.0.1:0"},
		{"off", 0, ""},
		{"off", 4, ""},
	}
	for _, c := range cases {
		got, err := MetricsAddr(c.base, c.rank)
		if err != nil || got != c.want {
			t.Errorf("MetricsAddr(%q, %d) = %q, %v; want %q", c.base, c.rank, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		base string
		rank int
	}{{"127.0.0.1:65535", 1}, {"localhost", 0}, {"127.0.0.1:http", 0}, {"127.0.0.1:70000", 0}, {"", -1}} {
		if got, err := MetricsAddr(bad.base, bad.rank); err == nil {
			t.Errorf("MetricsAddr(%q, %d) = %q, want an error", bad.base, bad.rank, got)
		}
	}
}

func TestServeMetricsAndHealth(t *testing.T) {
	p, err := NewPrometheus(1, PromOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.ObserveStep(StepRecord{Step: 9, Tokens: 900, Loss: 2.5}, backend.MemoryStats{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	addr, err := p.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if h := httpGet(t, "http://"+addr+"/healthz"); h != "ok" {
		t.Errorf("/healthz = %q, want ok", h)
	}
	body := httpGet(t, "http://"+addr+"/metrics")
	for _, line := range []string{`gotrain_step{rank="1"} 9`, `gotrain_tokens_total{rank="1"} 900`, `gotrain_loss{rank="1"} 2.5`} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	cancel()
	// The listener closes once ctx ends.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 5 s after ctx ended", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeBusyPortAndOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, err := NewPrometheus(0, PromOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := p.Serve(ctx, ln.Addr().String())
	var busy *PortBusyError
	if !errors.As(err, &busy) || addr != "" || busy.Addr != ln.Addr().String() {
		t.Errorf("Serve on a taken port = %q, %v; want a *PortBusyError for %s", addr, err, ln.Addr())
	}
	for _, off := range []string{"off", ""} {
		if addr, err := p.Serve(ctx, off); addr != "" || err != nil {
			t.Errorf("Serve(%q) = %q, %v; want no server", off, addr, err)
		}
	}
	if _, err := p.Serve(ctx, "not an address"); err == nil || errors.As(err, &busy) {
		t.Errorf("Serve on a malformed address = %v, want a plain error", err)
	}
}

// promtool's linter accepts the whole exposition: names, units, _total
// suffixes, help texts, and the Go and process collectors.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := lookTool(t, "promtool")
	p, err := NewPrometheus(0, PromOptions{GPUs: func() ([]GPUInfo, error) {
		return []GPUInfo{{Index: 0, MemoryUsedBytes: 1 << 30, Utilization: 0.9}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var mem backend.MemoryStats
	mem.Current[backend.Device][backend.Activations] = 1 << 28
	p.ObserveStep(StepRecord{Step: 1, Tokens: 1024, Loss: 10.9, LR: 1e-4, StepSeconds: 0.2, TokensPerSecond: 5120},
		mem, CommCounters{"all_reduce": {Bytes: 4096, Seconds: 0.001}})
	p.ObserveCheckpoint(1.25)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := p.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := httpGet(t, "http://"+addr+"/metrics")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
}
