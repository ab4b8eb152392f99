package cuda

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// tinyOps queues n one-launch ops on x (a Scale each) and waits for them.
func tinyOps(tb testing.TB, b *Backend, x backend.Buffer, n int) {
	for range n {
		b.Scale(x, 1)
	}
	if err := b.Sync(); err != nil {
		tb.Fatal(err)
	}
}

// Kernel launches do not each cross to the device thread: a run of ops
// is carried by a handful of handoffs, launches are still counted one by
// one by the driver, and a failing deferred launch still reaches Sync.
func TestLaunchesAreBatched(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	x, err := b.Alloc(backend.Device, backend.Activations, backend.F32, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free(x)
	const n = 600
	tinyOps(t, b, x, 1) // load and warm everything once
	before := b.dev.HandoffStats()
	tinyOps(t, b, x, n)
	d := b.dev.HandoffStats()
	handoffs, deferred := d.Handoffs-before.Handoffs, d.Deferred-before.Deferred
	t.Logf("%d launches: %d handoffs, %d deferred calls (%.0f launches per handoff)", n, handoffs, deferred, float64(n)/float64(handoffs))
	if deferred != n {
		t.Errorf("%d deferred calls for %d launches", deferred, n)
	}
	// One per maxDeferred launches, plus the Sync.
	if want := int64(n/256 + 1); handoffs > want {
		t.Errorf("%d handoffs for %d launches, want ≤ %d", handoffs, n, want)
	}
}

// BenchmarkTinyLaunches1000 is 1000 one-launch ops through the backend and
// one Sync on the mock driver with the kernel emulation: the cost per
// launch of the Go side (handoffs, argument packing) plus the emulated
// kernel. ns/launch and launches/handoff are reported.
func BenchmarkTinyLaunches1000(b *testing.B) {
	e := newEnv(b)
	be := e.backend(b)
	x, err := be.Alloc(backend.Device, backend.Activations, backend.F32, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Free(x)
	tinyOps(b, be, x, 1)
	before := be.dev.HandoffStats()
	b.ResetTimer()
	for range b.N {
		tinyOps(b, be, x, 1000)
	}
	b.StopTimer()
	d := be.dev.HandoffStats()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(1000*b.N), "ns/launch")
	b.ReportMetric(float64(1000*b.N)/float64(d.Handoffs-before.Handoffs), "launches/handoff")
}
