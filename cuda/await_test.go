package cuda_test

import (
	"errors"
	"testing"

	"github.com/gotrain/gotrain/cuda"
)

// AwaitEvent waits on the waiter thread, which has the context current
// (the mock refuses cuEventSynchronize on a thread without one), while
// the device thread stays free; a closed device answers ErrClosed.
func TestAwaitEvent(t *testing.T) {
	drv := loadMock(t, 1)
	dev, err := drv.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := dev.NewStream(true)
	if err != nil {
		t.Fatal(err)
	}
	e, err := dev.NewEvent(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.RecordEvent(e, s); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-dev.AwaitEvent(e); err != nil {
			t.Fatalf("AwaitEvent: %v", err)
		}
	}
	if err := dev.DestroyEvent(e); err != nil {
		t.Fatal(err)
	}
	if err := dev.DestroyStream(s); err != nil {
		t.Fatal(err)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-dev.AwaitEvent(e); !errors.Is(err, cuda.ErrClosed) {
		t.Errorf("AwaitEvent on a closed device: %v, want ErrClosed", err)
	}
}

// Enqueue's calls run in order ahead of the next Do, their errors go to
// the sink, and on a closed device the sink hears ErrClosed.
func TestEnqueueRunsBeforeTheNextDo(t *testing.T) {
	drv := loadMock(t, 1)
	dev, err := drv.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	var sunk []error
	sink := func(err error) { sunk = append(sunk, err) }
	boom := errors.New("boom")
	for i := range 5 {
		dev.Enqueue(func(*cuda.Ctx) error {
			order = append(order, i)
			if i == 3 {
				return boom
			}
			return nil
		}, sink)
	}
	before := dev.HandoffStats()
	if err := dev.Do(func(*cuda.Ctx) error { order = append(order, 99); return nil }); err != nil {
		t.Fatal(err)
	}
	after := dev.HandoffStats()
	if want := []int{0, 1, 2, 3, 4, 99}; len(order) != len(want) || order[4] != 4 || order[5] != 99 || order[0] != 0 {
		t.Errorf("ran %v, want %v", order, want)
	}
	if len(sunk) != 1 || !errors.Is(sunk[0], boom) {
		t.Errorf("sink got %v, want only boom", sunk)
	}
	if after.Handoffs-before.Handoffs != 1 || after.Deferred-before.Deferred != 5 {
		t.Errorf("stats moved by %+v → %+v, want 1 handoff carrying 5 deferred calls", before, after)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	sunk = nil
	dev.Enqueue(func(*cuda.Ctx) error { t.Error("a call ran on a closed device"); return nil }, sink)
	if len(sunk) != 1 || !errors.Is(sunk[0], cuda.ErrClosed) {
		t.Errorf("Enqueue on a closed device: sink got %v, want ErrClosed", sunk)
	}
}
