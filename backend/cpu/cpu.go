// Package cpu owns gotrain's CPU backend: a backend.Backend whose every pool
// is host memory and whose ops are Go loops fanned out over a fixed number of
// goroutines, with GEMMs delegated to a blas.Impl.
//
// All three pools (Device, HostPinned, Host) are ordinary Go-allocated host
// memory, accounted separately so a CPU run reports what a GPU run would hold
// on the device. Every op runs synchronously: when a method returns its
// result is in memory, so Sync has nothing to wait for.
//
// Floating-point buffers may be F32, BF16 or F16 for every op, except the
// statistics the interface fixes to F32 (LayerNorm mean/rstd, attention
// lse, cross-entropy losses/probs, AdamW master/m/v). 16-bit values are
// widened to fp32, computed in fp32 and rounded to nearest-even on store.
package cpu

import (
	"runtime"
	"sync"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/blas"
)

// Options configures New.
type Options struct {
	// Gemm computes every large matrix product. It must be safe for
	// concurrent use (blas.Impl promises that); the backend calls it from one
	// goroutine per op so an internally multithreaded GEMM is never
	// oversubscribed, except attention, whose workers call it concurrently
	// on tiles small enough (at most 64³ multiply-adds) that a threaded BLAS
	// runs them on the calling thread.
	Gemm blas.Impl
	// Threads is how many goroutines an op fans out to; 0 means GOMAXPROCS.
	Threads int
}

// Backend is the CPU implementation of backend.Backend.
//
// Each op fans out to Threads goroutines itself and returns when done. The
// backend keeps no state between ops except memory accounting and a locked
// scratch pool, so ops on disjoint buffers may run concurrently from several
// goroutines: a ZeRO engine's communication goroutine copies gradients
// (Upload, Download, Copy, Add) while the backward pass computes. Alloc,
// Free, Memory and ResetPeak are safe for concurrent use.
type Backend struct {
	gemm blas.Impl
	// bgemm multiplies bf16 operands without widened copies; nil when the
	// GEMM has no bf16 path (OpenBLAS, gonum).
	bgemm   blas.BF16Impl
	threads int
	// pureGoGemm: the GEMM is gonum's, which attention's own vector tile
	// kernel outruns on its small tiles (attention_simd_amd64.go).
	pureGoGemm bool

	mu    sync.Mutex
	live  map[*backend.Memory]struct{}
	stats backend.MemoryStats

	scratch scratchPool
	// attScratch holds attention's per-worker tiles apart from scratch,
	// whose few slots the large 16-bit widening buffers would take.
	attScratch scratchPool
}

var _ backend.Backend = (*Backend)(nil)

// New returns a CPU backend. o.Gemm must not be nil.
func New(o Options) *Backend {
	if o.Gemm == nil {
		panic("cpu: Options.Gemm is nil")
	}
	threads := o.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	info := o.Gemm.Info()
	return &Backend{
		gemm:       o.Gemm,
		bgemm:      blas.AsBF16(o.Gemm),
		threads:    threads,
		pureGoGemm: info.Name == "gonum" || info.Name == "go",
		live:       make(map[*backend.Memory]struct{}),
	}
}

// Name implements backend.Backend.
func (be *Backend) Name() string { return "cpu" }

// Threads is the number of goroutines an op fans out to.
func (be *Backend) Threads() int { return be.threads }

// Sync implements backend.Backend. CPU ops finish before they return and
// report failures by panicking (shape bugs), so there is never queued work or
// a pending asynchronous error: Sync always returns nil.
func (be *Backend) Sync() error { return nil }
