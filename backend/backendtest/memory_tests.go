package backendtest

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// mustPanic fails t unless fn panics.
func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	fn()
}

func testMemory(t *testing.T, nb func(*testing.T) backend.Backend) {
	be := nb(t)
	// A backend may hold memory of its own from the start (a GPU library's
	// workspace); everything below is relative to it.
	be.ResetPeak()
	base := be.Memory()
	for _, p := range backend.Pools() {
		if base.Peak[p] != base.PoolTotal(p) {
			t.Fatalf("after ResetPeak, pool %s peak %d != total %d", p, base.Peak[p], base.PoolTotal(p))
		}
	}

	// One allocation per (pool, category), sizes distinct so a mix-up shows.
	type live struct {
		buf   backend.Buffer
		bytes int64
	}
	var bufs []live
	want := base
	n := 3
	for _, p := range backend.Pools() {
		for _, c := range backend.Categories() {
			for _, dt := range []backend.DType{backend.F32, backend.BF16} {
				n += 5
				b, err := be.Alloc(p, c, dt, n)
				if err != nil {
					t.Fatalf("Alloc(%s, %s, %s, %d): %v", p, c, dt, n, err)
				}
				if b.Len() != n || b.DType() != dt || b.Pool() != p || b.Category() != c {
					t.Fatalf("Alloc(%s, %s, %s, %d) = %s", p, c, dt, n, b)
				}
				raw := make([]byte, b.Bytes())
				for i := range raw {
					raw[i] = 0xa5
				}
				if err := be.Download(raw, b); err != nil {
					t.Fatal(err)
				}
				for i, x := range raw {
					if x != 0 {
						t.Fatalf("Alloc(%s, %s, %s, %d): byte %d = %#x, want zeroed memory", p, c, dt, n, i, x)
					}
				}
				bytes := int64(n * dt.Size())
				bufs = append(bufs, live{b, bytes})
				want.Current[p][c] += bytes
				want.Peak[p] += bytes
			}
		}
	}
	if got := be.Memory(); got != want {
		t.Fatalf("after allocating:\n got %+v\nwant %+v", got, want)
	}

	// Free every other allocation: Current drops, Peak stays.
	for i := 0; i < len(bufs); i += 2 {
		be.Free(bufs[i].buf)
		want.Current[bufs[i].buf.Pool()][bufs[i].buf.Category()] -= bufs[i].bytes
	}
	if got := be.Memory(); got != want {
		t.Fatalf("after freeing half:\n got %+v\nwant %+v", got, want)
	}
	for _, p := range backend.Pools() {
		if got := be.Memory().PoolTotal(p); got >= want.Peak[p] {
			t.Fatalf("pool %s total %d not below its peak %d after freeing", p, got, want.Peak[p])
		}
	}

	be.ResetPeak()
	for _, p := range backend.Pools() {
		want.Peak[p] = want.PoolTotal(p)
	}
	if got := be.Memory(); got != want {
		t.Fatalf("after ResetPeak:\n got %+v\nwant %+v", got, want)
	}

	// A new allocation raises the peak of its pool only.
	extra, err := be.Alloc(backend.HostPinned, backend.Comm, backend.F16, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want.Current[backend.HostPinned][backend.Comm] += 2000
	want.Peak[backend.HostPinned] += 2000
	if got := be.Memory(); got != want {
		t.Fatalf("after a new allocation:\n got %+v\nwant %+v", got, want)
	}
	be.Free(extra)
	want.Current[backend.HostPinned][backend.Comm] -= 2000
	if got := be.Memory(); got != want {
		t.Fatalf("after freeing it:\n got %+v\nwant %+v", got, want)
	}

	// Misuse panics.
	mustPanic(t, "double Free", func() { be.Free(extra) })
	mustPanic(t, "Free of a slice view", func() { be.Free(bufs[1].buf.Slice(1, 2)) })
	mustPanic(t, "Free of the zero Buffer", func() { be.Free(backend.Buffer{}) })
	if got := be.Memory(); got != want {
		t.Fatalf("a refused Free changed the accounting:\n got %+v\nwant %+v", got, want)
	}

	// Empty allocations are allowed and account nothing.
	empty, err := be.Alloc(backend.Device, backend.Workspace, backend.F32, 0)
	if err != nil {
		t.Fatalf("Alloc of 0 elements: %v", err)
	}
	if got := be.Memory(); got != want {
		t.Fatalf("an empty allocation changed the accounting:\n got %+v\nwant %+v", got, want)
	}
	be.Free(empty)
	if _, err := be.Alloc(backend.Device, backend.Workspace, backend.F32, -1); err == nil {
		t.Errorf("Alloc of -1 elements succeeded")
	}

	for i := 1; i < len(bufs); i += 2 {
		be.Free(bufs[i].buf)
	}
	if got := be.Memory(); got.Current != base.Current {
		t.Fatalf("after freeing everything:\n got %+v\nwant %+v", got.Current, base.Current)
	}
}
