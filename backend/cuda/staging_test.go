package cuda

import "testing"

// TestStagingWaitOrdering: a wait for the stream covers only the copies
// issued before it began. A Sync on another goroutine that began before a
// queued read's copy was issued, and returns after, must leave the read
// unfinished and its block lent; the next wait completes both. (Marking
// completion by the wait's return alone, as an epoch bumped after the
// wait, would report the read done and lend its block while its copy may
// still be running.)
func TestStagingWaitOrdering(t *testing.T) {
	var p stagingPool
	s := &stagingSlot{pending: true} // taken, its copy being queued
	p.slots = append(p.slots, s)
	if p.free(s) {
		t.Fatal("a block is free between take and issue")
	}
	w := p.beginWait() // another goroutine's Sync starts
	seq := p.issue(s)  // the copy is queued
	p.endWait(w)       // that Sync returns
	if p.done(seq) || p.free(s) {
		t.Fatal("a wait that began before the copy was issued completed it")
	}
	w2 := p.beginWait()
	p.endWait(w2)
	if !p.done(seq) || !p.free(s) {
		t.Fatal("a wait that began after the copy was issued did not complete it")
	}

	// Waits may return out of order: an older snapshot never moves the
	// completed count back.
	s.pending = true
	older := p.beginWait()
	seq = p.issue(s)
	newer := p.beginWait()
	p.endWait(newer)
	p.endWait(older)
	if !p.done(seq) {
		t.Fatal("a later wait's completion was undone by an earlier wait returning last")
	}

	// A held block (a queued read whose bytes are not yet taken) stays
	// lent after its copy completes; a released one is free at once.
	s.held = true
	if p.free(s) {
		t.Fatal("a held block is free")
	}
	s.held = false
	s.pending = true
	p.release(s)
	if !p.free(s) {
		t.Fatal("a released block is not free")
	}
}
