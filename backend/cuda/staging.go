package cuda

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
	cu "github.com/gotrain/gotrain/cuda"
)

// maxStagedBytes is the largest transfer that goes through pinned
// staging: a batch's token ids and the scalars a step reads are far
// smaller; weights at start-up are far larger and copy synchronously.
const maxStagedBytes = 4 << 20

// stagingPool lends pinned host blocks to async copies on the compute
// stream. A block lent at epoch e is free again once the backend has
// waited for the stream after it (epoch > e): its copy is then done. The
// trainer waits once per step, so a step reuses the blocks of the step
// before and allocates nothing after the first. Uploads are copied into a
// block before the call returns, so the caller may reuse its bytes.
// Guarded by Backend.mu.
type stagingPool struct {
	epoch uint64 // waits for the compute stream so far
	slots []*stagingSlot
}

type stagingSlot struct {
	buf  cu.HostBuffer
	used uint64 // epoch of the last loan
	lent bool   // lent at all yet
	held bool   // a queued read's bytes not yet taken
}

// take lends a block of at least n bytes, allocating one (a power of two
// from 4 KiB) only when every block that fits is still in flight.
func (p *stagingPool) take(b *Backend, n int) (*stagingSlot, error) {
	b.mu.Lock()
	var best *stagingSlot
	for _, s := range p.slots {
		if !s.held && (!s.lent || s.used < p.epoch) && s.buf.Len() >= n && (best == nil || s.buf.Len() < best.buf.Len()) {
			best = s
		}
	}
	if best != nil {
		best.used, best.lent = p.epoch, true
		b.mu.Unlock()
		return best, nil
	}
	b.mu.Unlock()
	size := 4 << 10
	for size < n {
		size <<= 1
	}
	h, err := b.dev.AllocHost(size)
	if err != nil {
		return nil, fmt.Errorf("pinned staging of %d bytes: %w", size, err)
	}
	// Not in MemoryStats, which accounts what callers allocate and the ops'
	// device workspace: a step holds a handful of these small blocks.
	b.mu.Lock()
	s := &stagingSlot{buf: h, used: p.epoch, lent: true}
	p.slots = append(p.slots, s)
	b.mu.Unlock()
	return s, nil
}

// free releases every block (Close).
func (p *stagingPool) free(b *Backend) error {
	var err error
	for _, s := range p.slots {
		if e := b.dev.FreeHost(s.buf); e != nil && err == nil {
			err = e
		}
	}
	p.slots = nil
	return err
}

var _ backend.QueuedReader = (*Backend)(nil)

// QueueRead implements backend.QueuedReader: an async copy of src into
// pinned staging now; the returned function waits for the stream only if
// the backend has not waited for it since (the optimizer step's own
// reads and Sync usually have), then returns the bytes.
func (b *Backend) QueueRead(src backend.Buffer) func() ([]byte, error) {
	if src.IsNil() || isHost(src.Pool()) || src.Bytes() > maxStagedBytes {
		return func() ([]byte, error) {
			out := make([]byte, src.Bytes())
			return out, b.Download(out, src)
		}
	}
	n := src.Bytes()
	slot, err := b.stage.take(b, n)
	if err == nil {
		err = b.dev.CopyDtoHAsync(slot.buf.Slice(0, n), devPtr(src), b.stream)
	}
	b.mu.Lock()
	at := b.stage.epoch
	if slot != nil {
		slot.held = true
	}
	b.mu.Unlock()
	return func() ([]byte, error) {
		if err != nil {
			return nil, fmt.Errorf("cuda queued read of %s: %w", src, err)
		}
		b.mu.Lock()
		done := b.stage.epoch > at
		b.mu.Unlock()
		if !done {
			if err := b.dev.StreamSynchronize(b.stream); err != nil {
				return nil, fmt.Errorf("cuda queued read of %s: %w", src, err)
			}
			b.mu.Lock()
			b.stage.epoch++
			b.mu.Unlock()
		}
		out := append([]byte(nil), slot.buf.Bytes()[:n]...)
		b.mu.Lock()
		slot.held = false
		b.mu.Unlock()
		return out, nil
	}
}
