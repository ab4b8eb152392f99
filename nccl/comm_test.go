package nccl

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

func testLoadMockVersionAndIDs(t *testing.T, w *world) {
	if got := w.lib.Version(); got != (Version{2, 19, 3}) || w.lib.VersionCode() != 21903 {
		t.Errorf("Version() = %v (%d), want 2.19.3 (21903)", got, w.lib.VersionCode())
	}
	if !strings.HasSuffix(w.lib.Path(), "libnccl.so.2") {
		t.Errorf("Path() = %q", w.lib.Path())
	}
	a, err := w.lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a[:], b[:]) {
		t.Error("two unique ids are equal")
	}
	cs := w.comms(t, 3)
	for r, c := range cs {
		if c.Rank() != r || c.Size() != 3 || c.Library() != w.lib {
			t.Errorf("comm %d: rank %d of %d", r, c.Rank(), c.Size())
		}
	}
}

// TestVersionGating runs against mocks of releases before bf16 and Avg:
// one in the old version encoding (2.7.8) and one in the new (2.9.6);
// and against 2.10.3, the first release that has them.
func TestVersionGating(t *testing.T) {
	for _, c := range []struct {
		code    string
		version string
		has     bool
	}{{"2708", "2.7.8", false}, {"20906", "2.9.6", false}, {"21003", "2.10.3", true}} {
		t.Run(c.version, func(t *testing.T) {
			w := newWorld(t, "MOCK_NCCL_VERSION="+c.code)
			if got := w.lib.Version().String(); got != c.version {
				t.Fatalf("Version() = %s, want %s", got, c.version)
			}
			cs := w.comms(t, 2)
			bf := []buffer{put(t, w.devs[0], []float64{1, 2}, Bfloat16), put(t, w.devs[1], []float64{3, 4}, Bfloat16)}
			f := []buffer{put(t, w.devs[0], []float64{1, 2}, Float32), put(t, w.devs[1], []float64{3, 4}, Float32)}
			for name, call := range map[string]func(r int) error{
				"bfloat16": func(r int) error { return cs[r].AllReduce(bf[r].ptr, bf[r].ptr, 2, Bfloat16, Sum, w.streams[r]) },
				"avg":      func(r int) error { return cs[r].AllReduce(f[r].ptr, f[r].ptr, 2, Float32, Avg, w.streams[r]) },
			} {
				errs := w.each(2, call)
				for r, err := range errs {
					if c.has {
						if err != nil {
							t.Errorf("%s on rank %d: %v", name, r, err)
						}
						continue
					}
					if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "2.10.3") || !strings.Contains(err.Error(), c.version) {
						t.Errorf("%s on rank %d: %v, want ErrUnsupported naming 2.10.3 and %s", name, r, err, c.version)
					}
				}
			}
			if c.has {
				for r := 0; r < 2; r++ {
					if got := get(t, w.devs[r], f[r]); got[0] != 2 || got[1] != 3 {
						t.Errorf("rank %d avg of {1, 2} and {3, 4}: %v, want [2 3]", r, got)
					}
				}
			}
			// What every NCCL 2 has still works.
			g := []buffer{put(t, w.devs[0], []float64{1, 2}, Float32), put(t, w.devs[1], []float64{3, 5}, Float32)}
			w.mustEach(t, 2, func(r int) error { return cs[r].AllReduce(g[r].ptr, g[r].ptr, 2, Float32, Sum, w.streams[r]) })
			for r := 0; r < 2; r++ {
				if got := get(t, w.devs[r], g[r]); got[0] != 4 || got[1] != 7 {
					t.Errorf("rank %d sum of {1, 2} and {3, 5}: %v, want [4 7]", r, got)
				}
			}
			// ncclCommFinalize arrived in 2.14.3.
			if err := cs[0].Finalize(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "2.14.3") {
				t.Errorf("Finalize: %v, want ErrUnsupported naming 2.14.3", err)
			}
		})
	}
}

// TestErrorDetail: ranks that disagree about a collective get the mock's
// ncclInvalidArgument with its result text and, from 2.13.4, its last
// error message, read on the thread of the failing call.
func TestErrorDetail(t *testing.T) {
	for _, c := range []struct {
		name    string
		defines []string
		detail  bool
	}{{"2.19.3", nil, true}, {"2.12.12", []string{"MOCK_NCCL_VERSION=21212"}, false}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.defines...)
			cs := w.comms(t, 2)
			bufs := []buffer{put(t, w.devs[0], make([]float64, 5), Float32), put(t, w.devs[1], make([]float64, 5), Float32)}
			errs := w.each(2, func(r int) error {
				return cs[r].AllReduce(bufs[r].ptr, bufs[r].ptr, 4+r, Float32, Sum, w.streams[r])
			})
			for r, err := range errs {
				var e *Error
				if !errors.As(err, &e) || e.Result != InvalidArgument || e.Msg != "mock: invalid argument" {
					t.Fatalf("rank %d: %#v, want ncclInvalidArgument with the library's text", r, err)
				}
				if got := strings.Contains(e.Detail, "ranks disagree"); got != c.detail {
					t.Errorf("rank %d: detail %q (want it: %v)", r, e.Detail, c.detail)
				}
				for _, part := range []string{"ncclAllReduce", fmt.Sprintf("rank %d of 2", r), "ncclInvalidArgument (4)"} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("rank %d: %q lacks %q", r, err, part)
					}
				}
			}
		})
	}
}

// testAbort: a rank that aborts releases a peer blocked in a collective
// waiting for it, the peer's communicator reports the failure as an
// asynchronous error, and the aborted one is closed.
func testAbort(t *testing.T, w *world) {
	cs := w.comms(t, 2)
	bufs := []buffer{put(t, w.devs[0], []float64{1}, Float32), put(t, w.devs[1], []float64{2}, Float32)}
	if err := w.devs[0].Do(func(*cuda.Ctx) error { return cs[0].AsyncError() }); err != nil {
		t.Fatalf("healthy communicator: AsyncError() = %v", err)
	}
	done := make(chan error, 1)
	go func() {
		// Rank 0 enters an all-reduce rank 1 will never join.
		done <- w.devs[0].Do(func(*cuda.Ctx) error { return cs[0].AllReduce(bufs[0].ptr, bufs[0].ptr, 1, Float32, Sum, w.streams[0]) })
	}()
	if err := cs[1].Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := <-done; !IsResult(err, RemoteError) {
		t.Errorf("rank 0's all-reduce after rank 1 aborted: %v, want ncclRemoteError", err)
	}
	if err := w.devs[0].Do(func(*cuda.Ctx) error { return cs[0].AsyncError() }); !IsResult(err, RemoteError) {
		t.Errorf("rank 0 AsyncError() = %v, want ncclRemoteError", err)
	}
	for name, err := range map[string]error{
		"AllReduce": cs[1].AllReduce(bufs[1].ptr, bufs[1].ptr, 1, Float32, Sum, 0),
		"Abort":     cs[1].Abort(),
		"Destroy":   cs[1].Destroy(),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Abort: %v, want ErrClosed", name, err)
		}
	}
}

func testArgumentChecks(t *testing.T, w *world) {
	cs := w.comms(t, 3)
	c := cs[0]
	b := put(t, w.devs[0], make([]float64, 12), Float32)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"negative count", c.AllReduce(b.ptr, b.ptr, -1, Float32, Sum, 0), "count -1"},
		{"unknown type", c.AllReduce(b.ptr, b.ptr, 1, 42, Sum, 0), "unknown data type"},
		{"unknown op", c.AllReduce(b.ptr, b.ptr, 1, Float32, 9, 0), "unknown reduction"},
		{"null recv", c.AllGather(b.ptr, 0, 1, Float32, 0), "null"},
		{"root", c.Broadcast(b.ptr, b.ptr, 1, Float32, 3, 0), "root 3 is not a rank of 3"},
		{"peer", c.Send(b.ptr, 1, Float32, -1, 0), "peer -1"},
		{"recv peer", c.Recv(b.ptr, 1, Float32, 5, 0), "peer 5"},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument mentioning %q", tc.name, tc.err, tc.want)
		}
	}
	id, err := w.lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.lib.CommInitRank(2, id, 2); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CommInitRank rank 2 of 2: %v", err)
	}
}

// TestCallsMissingFromOldNCCL: against a 2.4.1 mock, which predates
// ncclCommAbort, ncclCommGetAsyncError (2.4.2) and ncclSend/ncclRecv
// (2.7.3), those calls say which release they need; the rest works. A
// one-rank communicator needs no peers (nor a device, for the mock).
func TestCallsMissingFromOldNCCL(t *testing.T) {
	t.Setenv(EnvLibrary, cudatest.BuildMockNCCL(t, "MOCK_NCCL_VERSION=2401"))
	lib, err := Load(LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lib.Version().String(); got != "2.4.1" {
		t.Fatalf("Version() = %s, want 2.4.1", got)
	}
	id, err := lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := lib.CommInitRank(1, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]struct {
		err   error
		since string
	}{
		"ncclCommAbort":         {c.Abort(), "2.4.2"},
		"ncclCommGetAsyncError": {c.AsyncError(), "2.4.2"},
		"ncclSend":              {c.Send(256, 1, Float32, 0, 0), "2.7.3"},
		"ncclRecv":              {c.Recv(256, 1, Float32, 0, 0), "2.7.3"},
	} {
		if !errors.Is(call.err, ErrUnsupported) || !strings.Contains(call.err.Error(), name) || !strings.Contains(call.err.Error(), call.since) {
			t.Errorf("%s on 2.4.1: %v, want ErrUnsupported naming %s", name, call.err, call.since)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close (destroy only, no finalize before 2.14.3): %v", err)
	}
}
