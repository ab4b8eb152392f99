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
// stream. Each copy that uses a block is given a sequence number when it
// has been queued (issue); a wait for the stream covers every copy issued
// before the wait began, so it takes a snapshot of the count first
// (beginWait) and, once the stream is idle, marks that many complete
// (endWait). A block is free again once its copy is complete. The snapshot
// is what makes this safe when a wait on one goroutine (Sync) overlaps a
// copy queued on another: a wait that began before the copy was queued
// may return before the copy has run, and must not free its block. The
// trainer waits once per step, so a step reuses the blocks of the step
// before and allocates nothing after the first. Uploads are copied into a
// block before the call returns, so the caller may reuse its bytes.
// Guarded by Backend.mu.
type stagingPool struct {
	issued    uint64 // copies queued on blocks so far
	completed uint64 // the first completed copies are done: a wait that began after they were issued has returned
	slots     []*stagingSlot
}

type stagingSlot struct {
	buf     cu.HostBuffer
	seq     uint64 // sequence number of the last copy that used it
	pending bool   // lent, its copy not yet issued
	held    bool   // a queued read's bytes not yet taken
}

// free says the slot can be lent: no copy of it is being queued or in
// flight, and no queued read still has to take its bytes.
func (p *stagingPool) free(s *stagingSlot) bool {
	return !s.pending && !s.held && s.seq <= p.completed
}

// issue records that slot's copy has been queued and returns its number.
func (p *stagingPool) issue(s *stagingSlot) uint64 {
	p.issued++
	s.seq, s.pending = p.issued, false
	return s.seq
}

// release returns a slot whose copy was never queued.
func (p *stagingPool) release(s *stagingSlot) { s.pending = false }

// beginWait is called before waiting for the stream: the wait covers the
// copies issued so far.
func (p *stagingPool) beginWait() uint64 { return p.issued }

// endWait is called after a wait that began at snapshot returned: those
// copies are done.
func (p *stagingPool) endWait(snapshot uint64) { p.completed = max(p.completed, snapshot) }

// done says copy seq is complete.
func (p *stagingPool) done(seq uint64) bool { return seq <= p.completed }

// take lends a block of at least n bytes, allocating one (a power of two
// from 4 KiB) only when every block that fits is still in use. The caller
// queues its copy and then calls issue, or release if it queued none.
func (p *stagingPool) take(b *Backend, n int) (*stagingSlot, error) {
	b.mu.Lock()
	var best *stagingSlot
	for _, s := range p.slots {
		if p.free(s) && s.buf.Len() >= n && (best == nil || s.buf.Len() < best.buf.Len()) {
			best = s
		}
	}
	if best != nil {
		best.pending = true
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
	s := &stagingSlot{buf: h, pending: true}
	p.slots = append(p.slots, s)
	b.mu.Unlock()
	return s, nil
}

// issued records under the backend's lock that s's copy is queued.
func (b *Backend) issued(s *stagingSlot) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stage.issue(s)
}

// released returns s unused under the backend's lock.
func (b *Backend) released(s *stagingSlot) {
	b.mu.Lock()
	b.stage.release(s)
	b.mu.Unlock()
}

// waitStream waits for the compute stream and marks every copy issued
// before the wait began complete.
func (b *Backend) waitStream() error {
	b.mu.Lock()
	snap := b.stage.beginWait()
	b.mu.Unlock()
	if err := b.dev.StreamSynchronize(b.stream); err != nil {
		return err
	}
	b.mu.Lock()
	b.stage.endWait(snap)
	b.mu.Unlock()
	return nil
}

// freeAll releases every block (Close).
func (p *stagingPool) freeAll(b *Backend) error {
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
	var seq uint64
	if err == nil {
		if err = b.dev.CopyDtoHAsync(slot.buf.Slice(0, n), devPtr(src), b.stream); err != nil {
			b.released(slot)
		} else {
			b.mu.Lock()
			seq = b.stage.issue(slot)
			slot.held = true
			b.mu.Unlock()
		}
	}
	return func() ([]byte, error) {
		if err != nil {
			return nil, fmt.Errorf("cuda queued read of %s: %w", src, err)
		}
		b.mu.Lock()
		done := b.stage.done(seq)
		b.mu.Unlock()
		if !done {
			if err := b.waitStream(); err != nil {
				return nil, fmt.Errorf("cuda queued read of %s: %w", src, err)
			}
		}
		out := append([]byte(nil), slot.buf.Bytes()[:n]...)
		b.mu.Lock()
		slot.held = false
		b.mu.Unlock()
		return out, nil
	}
}
