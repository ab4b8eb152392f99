package cuda

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
	cu "github.com/gotrain/gotrain/cuda"
)

func (b *Backend) notePeak(p backend.Pool) {
	if t := b.stats.PoolTotal(p); t > b.stats.Peak[p] {
		b.stats.Peak[p] = t
	}
}

// Alloc implements backend.Backend: Device is cuMemAlloc memory, HostPinned
// cuMemAllocHost memory, Host Go memory; all zeroed.
func (b *Backend) Alloc(pool backend.Pool, cat backend.Category, dt backend.DType, n int) (backend.Buffer, error) {
	if n < 0 || dt.Size() == 0 {
		return backend.Buffer{}, fmt.Errorf("cuda alloc %s %s: bad length %d or dtype %s", pool, cat, n, dt)
	}
	nbytes := n * dt.Size()
	mem := &backend.Memory{Pool: pool, Cat: cat, Bytes: nbytes}
	switch pool {
	case backend.Device:
		if nbytes > 0 {
			p, err := b.dev.Alloc(nbytes)
			if err != nil {
				return backend.Buffer{}, fmt.Errorf("cuda alloc %d bytes of %s on device %d: %w", nbytes, cat,
					b.dev.Info().Ordinal, err)
			}
			// On the compute stream, so the ops that use the buffer
			// next come after it (a synchronous memset may return
			// before it is done, and the stream is non-blocking).
			if err := b.dev.MemsetD8Async(p, 0, nbytes, b.stream); err != nil {
				_ = b.dev.Free(p)
				return backend.Buffer{}, fmt.Errorf("cuda alloc: zero %d bytes: %w", nbytes, err)
			}
			mem.Dev = uintptr(p)
		}
	case backend.HostPinned:
		mem.Host = []byte{}
		if nbytes > 0 {
			h, err := b.dev.AllocHost(nbytes)
			if err != nil {
				return backend.Buffer{}, fmt.Errorf("cuda alloc %d pinned host bytes of %s: %w", nbytes, cat, err)
			}
			mem.Host = h.Bytes()
			clear(mem.Host)
			b.mu.Lock()
			b.pinned[mem] = h
			b.mu.Unlock()
		}
	case backend.Host:
		// Whole float32 words, so any dtype's elements are aligned.
		words := make([]float32, (nbytes+3)/4)
		mem.Host = f32Bytes(words)[:nbytes:nbytes]
	default:
		return backend.Buffer{}, fmt.Errorf("cuda alloc: unknown pool %s", pool)
	}
	b.mu.Lock()
	b.live[mem] = struct{}{}
	b.stats.Current[pool][cat] += int64(nbytes)
	b.notePeak(pool)
	b.mu.Unlock()
	return backend.NewBuffer(mem, dt, n), nil
}

// Free implements backend.Backend.
func (b *Backend) Free(x backend.Buffer) {
	m := x.Mem()
	if m == nil || x.Off() != 0 {
		panic("cuda: Free of a zero or sliced Buffer")
	}
	if m.Freed {
		panic("cuda: double Free")
	}
	b.check("free", b.release(m))
}

func (b *Backend) release(m *backend.Memory) error {
	b.mu.Lock()
	if _, ok := b.live[m]; !ok {
		b.mu.Unlock()
		panic("cuda: Free of a buffer this backend did not allocate")
	}
	delete(b.live, m)
	h, pinned := b.pinned[m]
	delete(b.pinned, m)
	b.stats.Current[m.Pool][m.Cat] -= int64(m.Bytes)
	m.Freed = true
	b.mu.Unlock()
	switch {
	case m.Pool == backend.Device && m.Dev != 0:
		// The memory may still be read by queued work.
		if err := b.dev.StreamSynchronize(b.stream); err != nil {
			return err
		}
		return b.dev.Free(cu.DevicePtr(m.Dev))
	case pinned:
		m.Host = nil
		return b.dev.FreeHost(h)
	}
	m.Host = nil
	return nil
}

// Memory implements backend.Backend.
func (b *Backend) Memory() backend.MemoryStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// ResetPeak implements backend.Backend.
func (b *Backend) ResetPeak() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range backend.Pools() {
		b.stats.Peak[p] = b.stats.PoolTotal(p)
	}
}
