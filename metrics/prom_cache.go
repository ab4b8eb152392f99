package metrics

import (
	"net/http"
	"sync"
	"time"
)

// A scrape gathers every collector, the Go collector's included, which
// stops the world to read the runtime's memory statistics: sixteen
// keep-alive clients scraping back to back halve a CPU run's tokens per
// second. So /metrics renders the page at most once per
// ScrapeInterval and serves that page to every scrape in between (and to
// every scrape that arrives while it renders), and at most
// MaxConcurrentScrapes are served at once: the rest get 503 with
// Retry-After, as promhttp's MaxRequestsInFlight does.

const (
	// DefaultScrapeInterval is how long a rendered /metrics page is served
	// again. Prometheus scrapes every 15 s by default, so a second of
	// staleness is never seen by it.
	DefaultScrapeInterval = time.Second
	// DefaultMaxConcurrentScrapes bounds the scrapes served at once.
	DefaultMaxConcurrentScrapes = 4

	// maxCachedPages bounds the pages kept, one per distinct Accept and
	// Accept-Encoding pair (a Prometheus server sends one of each); longer
	// headers than maxCacheKey are rendered without caching.
	maxCachedPages = 8
	maxCacheKey    = 512
)

// scrapeCache serves next's responses, rendered at most once per interval
// for each kind of request, with at most cap(slots) requests at once.
type scrapeCache struct {
	next     http.Handler
	interval time.Duration
	slots    chan struct{}

	mu    sync.Mutex
	pages map[string]*cachedPage
}

// cachedPage is one rendered response; ready closes once it is complete.
type cachedPage struct {
	ready  chan struct{}
	at     time.Time // when its rendering started
	status int
	header http.Header
	body   []byte
}

func newScrapeCache(next http.Handler, interval time.Duration, maxConcurrent int) *scrapeCache {
	if interval <= 0 {
		interval = DefaultScrapeInterval
	}
	if maxConcurrent <= 0 {
		maxConcurrent = DefaultMaxConcurrentScrapes
	}
	return &scrapeCache{next: next, interval: interval, slots: make(chan struct{}, maxConcurrent), pages: map[string]*cachedPage{}}
}

func (s *scrapeCache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many concurrent scrapes of this rank's /metrics: scrape from fewer clients or less often", http.StatusServiceUnavailable)
		return
	}
	p := s.page(r)
	select {
	case <-p.ready:
	case <-r.Context().Done():
		return
	}
	for k, v := range p.header {
		w.Header()[k] = v
	}
	w.WriteHeader(p.status)
	w.Write(p.body)
}

// page returns the page for r's kind of request: a fresh one (ready or
// still rendering), or one this call renders.
func (s *scrapeCache) page(r *http.Request) *cachedPage {
	key := r.Header.Get("Accept") + "\x00" + r.Header.Get("Accept-Encoding")
	now := time.Now()
	s.mu.Lock()
	if p := s.pages[key]; p != nil && now.Sub(p.at) < s.interval {
		s.mu.Unlock()
		return p
	}
	p := &cachedPage{ready: make(chan struct{}), at: now}
	if len(key) <= maxCacheKey {
		if len(s.pages) >= maxCachedPages {
			for k, old := range s.pages {
				if now.Sub(old.at) >= s.interval {
					delete(s.pages, k)
				}
			}
		}
		if len(s.pages) < maxCachedPages {
			s.pages[key] = p
		}
	}
	s.mu.Unlock()
	s.render(p, r)
	return p
}

// render runs next for r into p.
func (s *scrapeCache) render(p *cachedPage, r *http.Request) {
	rec := &pageRecorder{page: p}
	p.header, p.status = http.Header{}, http.StatusOK
	defer close(p.ready)
	s.next.ServeHTTP(rec, r)
}

// pageRecorder is the http.ResponseWriter a page renders into.
type pageRecorder struct {
	page        *cachedPage
	wroteHeader bool
}

func (w *pageRecorder) Header() http.Header { return w.page.header }

func (w *pageRecorder) WriteHeader(status int) {
	if !w.wroteHeader {
		w.page.status, w.wroteHeader = status, true
	}
}

func (w *pageRecorder) Write(b []byte) (int, error) {
	w.wroteHeader = true
	w.page.body = append(w.page.body, b...)
	return len(b), nil
}
