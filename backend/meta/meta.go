// Package meta owns the accounting-only Backend: it allocates nothing, yet
// accounts every allocation exactly as the real backends do (n·size bytes
// by pool and category, with each pool's peak and the categories at that
// peak), checks every op's shapes as they do (a mismatch panics), does no
// arithmetic, and can record each op call with its dimensions and buffers.
//
// The real training code runs on it unchanged: gotrain estimate builds a
// run's engine, model and buffers and takes two steps on it (with a
// comm.Null playing one rank of the world), so the estimate is the run's
// own allocation sequence by construction; the trace of op calls is what a
// cost model turns into FLOPs and bytes.
//
// Download returns zeros and the reductions report zero and finite values,
// so code that reads results back (a loss, a gradient norm) runs on. A
// Backend is safe for concurrent use.
package meta

import (
	"fmt"
	"sync"

	"github.com/gotrain/gotrain/backend"
)

// Options configure a Backend.
type Options struct {
	// Name is what Name returns ("meta" when empty): the backend a run
	// would use, for messages.
	Name string
	// Trace records every op call (see Trace).
	Trace bool
}

// Backend is the accounting-only backend.
type Backend struct {
	name string

	mu      sync.Mutex
	live    map[*backend.Memory]struct{}
	stats   backend.MemoryStats
	atPeak  [numPools][numCategories]int64 // each pool's categories when its total peaked
	trace   []Call
	tracing bool
}

const (
	numPools      = 3
	numCategories = 7
)

var (
	_ backend.Backend             = (*Backend)(nil)
	_ backend.ResidualLayerNormer = (*Backend)(nil)
	_ backend.DecoderOps          = (*Backend)(nil)
	_ backend.Dropouter           = (*Backend)(nil)
)

// New returns an empty accounting backend.
func New(o Options) *Backend {
	if len(backend.Pools()) != numPools || len(backend.Categories()) != numCategories {
		panic("meta: pool or category list out of date")
	}
	name := o.Name
	if name == "" {
		name = "meta"
	}
	return &Backend{name: name, live: map[*backend.Memory]struct{}{}, tracing: o.Trace}
}

// Name implements backend.Backend.
func (be *Backend) Name() string { return be.name }

// Alloc implements backend.Backend: n·dt.Size() bytes are accounted under
// (pool, cat); no memory is held.
func (be *Backend) Alloc(pool backend.Pool, cat backend.Category, dt backend.DType, n int) (backend.Buffer, error) {
	if int(pool) >= numPools {
		return backend.Buffer{}, fmt.Errorf("meta alloc: unknown pool %s", pool)
	}
	if int(cat) >= numCategories {
		return backend.Buffer{}, fmt.Errorf("meta alloc: unknown category %s", cat)
	}
	if dt.Size() == 0 {
		return backend.Buffer{}, fmt.Errorf("meta alloc: unknown dtype %s", dt)
	}
	if n < 0 {
		return backend.Buffer{}, fmt.Errorf("meta alloc %s %s %s: negative length %d", pool, cat, dt, n)
	}
	const maxBytes = 1 << 50
	if n > maxBytes/dt.Size() {
		return backend.Buffer{}, fmt.Errorf("meta alloc %s %s %s: %d elements is too large", pool, cat, dt, n)
	}
	mem := &backend.Memory{Pool: pool, Cat: cat, Bytes: n * dt.Size()}
	be.mu.Lock()
	defer be.mu.Unlock()
	be.live[mem] = struct{}{}
	be.stats.Current[pool][cat] += int64(mem.Bytes)
	if t := be.stats.PoolTotal(pool); t > be.stats.Peak[pool] {
		be.stats.Peak[pool] = t
		be.atPeak[pool] = be.stats.Current[pool]
	}
	return backend.NewBuffer(mem, dt, n), nil
}

// Free implements backend.Backend. Freeing the zero Buffer, a slice view, a
// buffer twice or another backend's buffer panics, as the CPU backend's
// does.
func (be *Backend) Free(b backend.Buffer) {
	mem := b.Mem()
	if mem == nil {
		panic("meta: free of the zero Buffer")
	}
	if b.ByteOff() != 0 || b.Bytes() != mem.Bytes {
		panic("meta: free of a slice view")
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if _, ok := be.live[mem]; !ok {
		if mem.Freed {
			panic("meta: double free")
		}
		panic("meta: free of a buffer this backend did not allocate")
	}
	delete(be.live, mem)
	mem.Freed = true
	be.stats.Current[mem.Pool][mem.Cat] -= int64(mem.Bytes)
}

// Memory implements backend.Backend.
func (be *Backend) Memory() backend.MemoryStats {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.stats
}

// AtPeak is pool p's bytes by category at the moment its total last
// peaked (since New or ResetPeak): what was held, not the peak of each
// category on its own.
func (be *Backend) AtPeak(p backend.Pool) [numCategories]int64 {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.atPeak[p]
}

// ResetPeak implements backend.Backend.
func (be *Backend) ResetPeak() {
	be.mu.Lock()
	defer be.mu.Unlock()
	for _, p := range backend.Pools() {
		be.stats.Peak[p] = be.stats.PoolTotal(p)
		be.atPeak[p] = be.stats.Current[p]
	}
}

// Sync implements backend.Backend: there is never an asynchronous failure.
func (be *Backend) Sync() error { return nil }

// Upload implements backend.Backend: it checks the length and stores
// nothing.
func (be *Backend) Upload(dst backend.Buffer, src []byte) error {
	be.use("Upload", dst)
	if len(src) != dst.Bytes() {
		return fmt.Errorf("meta upload: %d bytes into a %d-byte buffer", len(src), dst.Bytes())
	}
	be.record("Upload", nil, arg("dst", dst, true))
	return nil
}

// Download implements backend.Backend: dst receives zeros.
func (be *Backend) Download(dst []byte, src backend.Buffer) error {
	be.use("Download", src)
	if len(dst) != src.Bytes() {
		return fmt.Errorf("meta download: %d bytes from a %d-byte buffer", len(dst), src.Bytes())
	}
	clear(dst)
	be.record("Download", nil, arg("src", src, false))
	return nil
}

// use panics on the zero Buffer or a freed one, as an op on a real backend
// would fail.
func (be *Backend) use(op string, b backend.Buffer) {
	mem := b.Mem()
	if mem == nil {
		panic("meta: " + op + ": zero Buffer")
	}
	if mem.Freed {
		panic("meta: " + op + ": use of a freed buffer")
	}
}
