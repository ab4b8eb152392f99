package cudatest

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// EnvCounters names the file the mock driver, cuBLAS and cuBLASLt count
// into (testdata/mock_counters.h); NewCounters creates it and sets the
// variable. A process started by the test inherits it, so a gotrain
// subprocess on the mocks is counted too.
const EnvCounters = "GOTRAIN_MOCK_COUNTERS"

// The counter file's layout, as mock_counters.h defines it: 64-bit slots
// in the machine's byte order.
const (
	slotMagic      = 0
	slotStreamSync = 1
	slotCtxSync    = 2
	slotEventSync  = 3
	slotDtoH       = 4
	slotHtoD       = 5
	slotAlloc      = 6
	slotAllocHost  = 7
	slotFree       = 8
	slotFreeHost   = 9
	slotLaunch     = 10
	slotAsyncCopy  = 11
	slotMemset     = 12
	slotQuery      = 13
	slotRecord     = 14
	slotWait       = 15
	slotUnrecorded = 16
	slotGEMM       = 32
	slotProducts   = 64
	numSlots       = 96

	counterMagic = 0x313030746e637467 // the bytes "gtcnt001" on a little-endian machine
)

// GEMMInput is the element type of a GEMM's A and B operands.
type GEMMInput int

// The input types the mocks tell apart.
const (
	InF32   GEMMInput = iota // CUDA_R_32F
	InBF16                   // CUDA_R_16BF
	InOther                  // anything else
	numInputs
)

func (g GEMMInput) String() string {
	return [...]string{"fp32", "bf16", "other"}[g]
}

// GEMMCompute is a GEMM's cublasComputeType_t.
type GEMMCompute int

// The compute types the mocks tell apart, in mock_counters.h's order.
const (
	Compute32F         GEMMCompute = iota // CUBLAS_COMPUTE_32F: true fp32
	Compute32FPedantic                    // CUBLAS_COMPUTE_32F_PEDANTIC
	Compute32FFast16F                     // CUBLAS_COMPUTE_32F_FAST_16F
	Compute32FFast16BF                    // CUBLAS_COMPUTE_32F_FAST_16BF
	Compute32FFastTF32                    // CUBLAS_COMPUTE_32F_FAST_TF32
	ComputeOther                          // anything else
	numComputes
)

func (c GEMMCompute) String() string {
	return [...]string{"32F", "32F_PEDANTIC", "32F_FAST_16F", "32F_FAST_16BF", "32F_FAST_TF32", "other"}[c]
}

// Counts is what the mock libraries counted, or the difference of two
// such snapshots (Sub).
type Counts struct {
	StreamSyncs  int64 // cuStreamSynchronize
	ContextSyncs int64 // cuCtxSynchronize
	EventSyncs   int64 // cuEventSynchronize
	BlockingDtoH int64 // cuMemcpyDtoH_v2, which waits for the device
	BlockingHtoD int64 // cuMemcpyHtoD_v2
	DeviceAllocs int64 // cuMemAlloc_v2
	PinnedAllocs int64 // cuMemAllocHost_v2
	DeviceFrees  int64 // cuMemFree_v2
	PinnedFrees  int64 // cuMemFreeHost
	Launches     int64 // cuLaunchKernel
	AsyncCopies  int64 // cuMemcpy*Async_v2
	Memsets      int64 // cuMemset*
	// StreamQueries counts cuStreamQuery, a poll: a completion path that
	// orders work by events makes none.
	StreamQueries int64
	EventRecords  int64 // cuEventRecord
	EventWaits    int64 // cuStreamWaitEvent
	// UnrecordedWaits counts cuStreamWaitEvent on an event never recorded,
	// which orders nothing: always a bug in the caller.
	UnrecordedWaits int64
	// GEMMs counts GEMM calls (cublasGemmEx, cublasGemmStridedBatchedEx,
	// cublasLtMatmul) by input and compute type; Products counts the
	// products they computed (a strided batch of n counts n).
	GEMMs, Products [numInputs][numComputes]int64
}

// HostSyncs is every call that makes the host wait for the device: stream,
// context and event synchronisations and blocking device-to-host copies.
func (c Counts) HostSyncs() int64 {
	return c.StreamSyncs + c.ContextSyncs + c.EventSyncs + c.BlockingDtoH
}

// Allocations is device and pinned-host allocations.
func (c Counts) Allocations() int64 { return c.DeviceAllocs + c.PinnedAllocs }

// GEMMCalls is the GEMM calls whose operands are in, any compute type.
func (c Counts) GEMMCalls(in GEMMInput) int64 {
	var n int64
	for _, v := range c.GEMMs[in] {
		n += v
	}
	return n
}

// AllGEMMCalls is every GEMM call.
func (c Counts) AllGEMMCalls() int64 {
	var n int64
	for in := range numInputs {
		n += c.GEMMCalls(in)
	}
	return n
}

// Sub is c − prev, slot by slot: what happened between two snapshots.
func (c Counts) Sub(prev Counts) Counts {
	d := c
	for _, p := range []struct{ a, b *int64 }{
		{&d.StreamSyncs, &prev.StreamSyncs}, {&d.ContextSyncs, &prev.ContextSyncs}, {&d.EventSyncs, &prev.EventSyncs},
		{&d.BlockingDtoH, &prev.BlockingDtoH}, {&d.BlockingHtoD, &prev.BlockingHtoD},
		{&d.DeviceAllocs, &prev.DeviceAllocs}, {&d.PinnedAllocs, &prev.PinnedAllocs},
		{&d.DeviceFrees, &prev.DeviceFrees}, {&d.PinnedFrees, &prev.PinnedFrees},
		{&d.Launches, &prev.Launches}, {&d.AsyncCopies, &prev.AsyncCopies}, {&d.Memsets, &prev.Memsets},
		{&d.StreamQueries, &prev.StreamQueries}, {&d.EventRecords, &prev.EventRecords},
		{&d.EventWaits, &prev.EventWaits}, {&d.UnrecordedWaits, &prev.UnrecordedWaits},
	} {
		*p.a -= *p.b
	}
	for in := range numInputs {
		for ct := range numComputes {
			d.GEMMs[in][ct] -= prev.GEMMs[in][ct]
			d.Products[in][ct] -= prev.Products[in][ct]
		}
	}
	return d
}

// StepLine is the one-line structure of a training step from the counts of
// that step: "bf16 step: 0 fp32 GEMMs, 1 host syncs, 0 allocations, 212
// launches" for label "bf16". fp32 GEMMs are those with fp32 operands,
// whatever their compute type.
func (c Counts) StepLine(label string) string {
	return fmt.Sprintf("%s step: %d fp32 GEMMs, %d host syncs, %d allocations, %d launches",
		label, c.GEMMCalls(InF32), c.HostSyncs(), c.Allocations(), c.Launches)
}

// Detail lists every non-zero counter, for a test log.
func (c Counts) Detail() string {
	s := fmt.Sprintf("syncs: stream %d, context %d, event %d, blocking DtoH %d; blocking HtoD %d; "+
		"allocs: device %d, pinned %d; frees: device %d, pinned %d; launches %d; async copies %d; memsets %d; "+
		"stream queries %d; event records %d, waits %d (unrecorded %d); GEMMs:",
		c.StreamSyncs, c.ContextSyncs, c.EventSyncs, c.BlockingDtoH, c.BlockingHtoD, c.DeviceAllocs, c.PinnedAllocs,
		c.DeviceFrees, c.PinnedFrees, c.Launches, c.AsyncCopies, c.Memsets,
		c.StreamQueries, c.EventRecords, c.EventWaits, c.UnrecordedWaits)
	none := true
	for in := range numInputs {
		for ct := range numComputes {
			if n := c.GEMMs[in][ct]; n != 0 {
				s += fmt.Sprintf(" %s/%s %d (%d products)", in, ct, n, c.Products[in][ct])
				none = false
			}
		}
	}
	if none {
		s += " none"
	}
	return s
}

// Counters is a counter file the mocks loaded from now on count into.
type Counters struct{ path string }

// NewCounters creates a zeroed counter file in a temporary directory of
// tb and points EnvCounters at it for the rest of tb. Mock libraries count
// into the file named by the variable when they first count after it is
// set, so build or load them after this call (or at least count nothing
// before it).
func NewCounters(tb testing.TB) *Counters {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "mock-counters")
	buf := make([]byte, 8*numSlots)
	binary.NativeEndian.PutUint64(buf[8*slotMagic:], counterMagic)
	if err := os.WriteFile(path, buf, 0o600); err != nil {
		tb.Fatalf("create the mock counter file: %v", err)
	}
	tb.Setenv(EnvCounters, path)
	return &Counters{path: path}
}

// Path is the counter file, for a subprocess's environment.
func (c *Counters) Path() string { return c.path }

// Read takes a snapshot. Read when the counted work is done (after a
// Sync): slots are read one by one, not as a whole.
func (c *Counters) Read() (Counts, error) {
	b, err := os.ReadFile(c.path)
	if err != nil {
		return Counts{}, fmt.Errorf("read the mock counters: %w", err)
	}
	if len(b) < 8*numSlots || binary.NativeEndian.Uint64(b) != counterMagic {
		return Counts{}, fmt.Errorf("mock counter file %s: %d bytes or a wrong magic number; was it made by NewCounters?", c.path, len(b))
	}
	v := func(i int) int64 { return int64(binary.NativeEndian.Uint64(b[8*i:])) }
	n := Counts{
		StreamSyncs: v(slotStreamSync), ContextSyncs: v(slotCtxSync), EventSyncs: v(slotEventSync),
		BlockingDtoH: v(slotDtoH), BlockingHtoD: v(slotHtoD),
		DeviceAllocs: v(slotAlloc), PinnedAllocs: v(slotAllocHost), DeviceFrees: v(slotFree), PinnedFrees: v(slotFreeHost),
		Launches: v(slotLaunch), AsyncCopies: v(slotAsyncCopy), Memsets: v(slotMemset),
		StreamQueries: v(slotQuery), EventRecords: v(slotRecord), EventWaits: v(slotWait), UnrecordedWaits: v(slotUnrecorded),
	}
	for in := range numInputs {
		for ct := range numComputes {
			n.GEMMs[in][ct] = v(slotGEMM + int(in)*int(numComputes) + int(ct))
			n.Products[in][ct] = v(slotProducts + int(in)*int(numComputes) + int(ct))
		}
	}
	return n, nil
}

// Snapshot is Read that fails tb on error.
func (c *Counters) Snapshot(tb testing.TB) Counts {
	tb.Helper()
	n, err := c.Read()
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
