package cpu

import (
	"fmt"
	"unsafe"

	"github.com/gotrain/gotrain/backend"
)

// alignment of every allocation's first byte: a cache line, so rows handed to
// a GEMM start on one.
const alignment = 64

// Alloc implements backend.Backend. The memory is a []float32-backed Go
// allocation (so any dtype's elements are naturally aligned) whose first byte
// is 64-byte aligned. Exactly n·dt.Size() bytes are accounted under
// (pool, cat).
func (be *Backend) Alloc(pool backend.Pool, cat backend.Category, dt backend.DType, n int) (backend.Buffer, error) {
	if !validPool(pool) {
		return backend.Buffer{}, fmt.Errorf("cpu alloc: unknown pool %s", pool)
	}
	if !validCategory(cat) {
		return backend.Buffer{}, fmt.Errorf("cpu alloc: unknown category %s", cat)
	}
	if !validDType(dt) {
		return backend.Buffer{}, fmt.Errorf("cpu alloc: unknown dtype %s", dt)
	}
	if n < 0 {
		return backend.Buffer{}, fmt.Errorf("cpu alloc %s %s %s: negative length %d", pool, cat, dt, n)
	}
	const maxBytes = 1 << 50
	if n > maxBytes/dt.Size() {
		return backend.Buffer{}, fmt.Errorf("cpu alloc %s %s %s: %d elements is too large", pool, cat, dt, n)
	}
	nbytes := n * dt.Size()
	mem := &backend.Memory{Host: alignedBytes(nbytes), Pool: pool, Cat: cat, Bytes: nbytes}

	be.mu.Lock()
	be.live[mem] = struct{}{}
	be.stats.Current[pool][cat] += int64(nbytes)
	if t := be.stats.PoolTotal(pool); t > be.stats.Peak[pool] {
		be.stats.Peak[pool] = t
	}
	be.mu.Unlock()
	return backend.NewBuffer(mem, dt, n), nil
}

// alignedBytes returns nbytes zeroed bytes starting on an alignment boundary,
// carved out of a []float32 so the storage is at least 4-byte aligned even
// before adjusting.
func alignedBytes(nbytes int) []byte {
	if nbytes == 0 {
		return []byte{}
	}
	const pad = alignment / 4
	words := make([]float32, (nbytes+3)/4+pad)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 4*len(words))
	shift := 0
	if r := int(uintptr(unsafe.Pointer(&raw[0])) % alignment); r != 0 {
		shift = alignment - r
	}
	return raw[shift : shift+nbytes : shift+nbytes]
}

// Free implements backend.Backend. Freeing the zero Buffer, a slice view, a
// buffer twice or another backend's buffer panics: each is a bug in the
// caller.
func (be *Backend) Free(b backend.Buffer) {
	mem := b.Mem()
	if mem == nil {
		panic("cpu: free of the zero Buffer")
	}
	if b.ByteOff() != 0 || b.Bytes() != mem.Bytes {
		panic("cpu: free of a slice view")
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if _, ok := be.live[mem]; !ok {
		if mem.Freed {
			panic("cpu: double free")
		}
		panic("cpu: free of a buffer this backend did not allocate")
	}
	delete(be.live, mem)
	mem.Freed = true
	mem.Host = nil
	be.stats.Current[mem.Pool][mem.Cat] -= int64(mem.Bytes)
}

// Memory implements backend.Backend.
func (be *Backend) Memory() backend.MemoryStats {
	be.mu.Lock()
	defer be.mu.Unlock()
	return be.stats
}

// ResetPeak implements backend.Backend: each pool's peak restarts at its
// current total.
func (be *Backend) ResetPeak() {
	be.mu.Lock()
	defer be.mu.Unlock()
	for _, p := range backend.Pools() {
		be.stats.Peak[p] = be.stats.PoolTotal(p)
	}
}

func validPool(p backend.Pool) bool {
	for _, q := range backend.Pools() {
		if p == q {
			return true
		}
	}
	return false
}

func validCategory(c backend.Category) bool {
	for _, d := range backend.Categories() {
		if c == d {
			return true
		}
	}
	return false
}

func validDType(dt backend.DType) bool {
	switch dt {
	case backend.F32, backend.BF16, backend.F16, backend.I32, backend.U16:
		return true
	}
	return false
}
