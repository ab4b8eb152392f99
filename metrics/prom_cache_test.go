package metrics

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gotrain/gotrain/backend"
)

// gatherCounter is a collector that counts how often the registry is
// gathered, and can hold every gather until released.
type gatherCounter struct {
	desc  *prometheus.Desc
	n     atomic.Int64
	block chan struct{} // nil: never blocks
}

func newGatherCounter(block chan struct{}) *gatherCounter {
	return &gatherCounter{desc: prometheus.NewDesc("test_gathers", "Gathers so far.", nil, nil), block: block}
}

func (g *gatherCounter) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *gatherCounter) Collect(ch chan<- prometheus.Metric) {
	n := g.n.Add(1)
	if g.block != nil {
		<-g.block
	}
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.CounterValue, float64(n))
}

func serveWith(t *testing.T, opts PromOptions, g *gatherCounter) (*Prometheus, string) {
	t.Helper()
	p, err := NewPrometheus(0, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Registry().Register(g); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := p.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return p, "http://" + addr + "/metrics"
}

// TestScrapeFloodGathersOncePerInterval: 16 keep-alive clients scraping
// back to back gathered the registry (and stopped the world for the Go
// collector) once per request, which halved training throughput. However
// many scrapes arrive, the registry is gathered at most once per interval.
func TestScrapeFloodGathersOncePerInterval(t *testing.T) {
	g := newGatherCounter(nil)
	_, url := serveWith(t, PromOptions{ScrapeInterval: 200 * time.Millisecond, MaxConcurrentScrapes: 32}, g)
	start := time.Now()
	var ok, scrapes atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for time.Since(start) < 500*time.Millisecond {
				resp, err := client.Get(url)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				scrapes.Add(1)
				if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "gotrain_step{rank=\"0\"}") {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	maxGathers := int64(elapsed/(200*time.Millisecond)) + 2
	if n := g.n.Load(); n > maxGathers {
		t.Errorf("%d scrapes in %v gathered the registry %d times, want at most %d (once per 200ms)", scrapes.Load(), elapsed, n, maxGathers)
	}
	if ok.Load() < 32 {
		t.Errorf("only %d of %d scrapes were served the metrics page", ok.Load(), scrapes.Load())
	}
}

// TestScrapesBeyondTheCapAreRefused: with two scrapes in flight (held by a
// slow gather), further scrapes are answered 503 with Retry-After at once
// instead of piling up.
func TestScrapesBeyondTheCapAreRefused(t *testing.T) {
	release := make(chan struct{})
	g := newGatherCounter(release)
	_, url := serveWith(t, PromOptions{MaxConcurrentScrapes: 2}, g)
	type result struct {
		status int
		retry  string
	}
	results := make(chan result, 5)
	for range 5 {
		go func() {
			resp, err := http.Get(url)
			if err != nil {
				results <- result{status: -1}
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, resp.Header.Get("Retry-After")}
		}()
	}
	refused := 0
	timeout := time.After(3 * time.Second)
	for refused < 3 {
		select {
		case r := <-results:
			if r.status != http.StatusServiceUnavailable || r.retry == "" {
				t.Fatalf("a scrape over the cap got status %d (Retry-After %q) while two were in flight, want 503 with Retry-After", r.status, r.retry)
			}
			refused++
		case <-timeout:
			close(release)
			t.Fatalf("%d of the 3 scrapes over the cap of 2 were refused within 3s; the rest piled up behind the slow gather", refused)
		}
	}
	close(release)
	for range 2 {
		if r := <-results; r.status != http.StatusOK {
			t.Errorf("a scrape within the cap got status %d, want 200", r.status)
		}
	}
	if n := g.n.Load(); n != 1 {
		t.Errorf("the two scrapes in flight gathered %d times, want once", n)
	}
}

// TestScrapeServesFreshValuesAfterInterval: within the interval a scrape
// gets the page already rendered; after it, the current values.
func TestScrapeServesFreshValuesAfterInterval(t *testing.T) {
	p, url := serveWith(t, PromOptions{ScrapeInterval: 100 * time.Millisecond}, newGatherCounter(nil))
	p.ObserveStep(StepRecord{Step: 1}, backend.MemoryStats{}, nil)
	if body := httpGet(t, url); !strings.Contains(body, "gotrain_step{rank=\"0\"} 1\n") {
		t.Fatalf("first scrape lacks step 1:\n%s", body)
	}
	p.ObserveStep(StepRecord{Step: 2}, backend.MemoryStats{}, nil)
	time.Sleep(150 * time.Millisecond)
	if body := httpGet(t, url); !strings.Contains(body, "gotrain_step{rank=\"0\"} 2\n") {
		t.Fatalf("a scrape after the interval lacks step 2:\n%s", body)
	}
}
