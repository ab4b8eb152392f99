// Package cuda is the CUDA backend: backend.Backend on one GPU. Device
// buffers are cuMemAlloc memory, the HostPinned pool is page-locked host
// memory (the target of ZeRO offload) and the Host pool ordinary Go memory.
// Every op is queued on one non-blocking compute stream: kernels from package kernels
// (NVRTC-compiled at start-up, cached on disk) and GEMMs through cuBLAS.
// Ops whose buffers all live in host pools (the offloaded optimizer) run on
// the host backend given in Options, so offload needs no special case in
// callers.
//
// Ops are asynchronous: a launch error is recorded and returned by the next
// Sync; Upload, Download, SumSquares and NonFinite wait for the stream. A
// Backend is safe for concurrent use: calls reach the device through its
// one OS thread, and the compute stream orders the work. That is what lets
// a communicator's goroutine (comm/ncclcomm) queue collectives on its own
// stream while the backward pass continues here.
package cuda

import (
	"fmt"
	"sync"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cublas"
	cu "github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/kernels"
)

// Options configures New.
type Options struct {
	// Device is the GPU; the Backend does not close it.
	Device *cu.Device
	// Compiler compiles the kernel program (NVRTC with a cache).
	Compiler *kernels.Compiler
	// BLAS is the loaded cuBLAS library.
	BLAS *cublas.Library
	// BLASLt, if not nil, is the loaded cuBLASLt: linear layers whose bias
	// has the output's dtype then add it in the GEMM's epilogue, and
	// MatmulGeluForward fuses the GELU there too. Without it those run as
	// a GEMM and kernels.
	BLASLt *cublas.LtLibrary
	// Host runs ops on host-pool buffers (the CPU backend). It never
	// allocates: the Backend owns every buffer.
	Host backend.Backend
	// AllowTF32 lets GEMMs whose inputs are fp32 run on tensor cores in
	// TF32 (CUBLAS_COMPUTE_32F_FAST_TF32: 10-bit mantissas in, fp32
	// accumulation), PyTorch's allow_tf32. Off, fp32 training multiplies
	// in true fp32 and matches the CPU backend. bf16 GEMMs are unaffected.
	AllowTF32 bool
}

// Backend is the CUDA backend on one device.
type Backend struct {
	dev    *cu.Device
	stream cu.Stream
	legacy cu.Event // recorded on the NULL stream after a synchronous copy (afterLegacy)
	k      *kernels.Set
	blas   *cublas.Handle
	lt     *ltState // nil without Options.BLASLt
	host   backend.Backend
	tf32   bool // Options.AllowTF32

	mu     sync.Mutex
	stats  backend.MemoryStats
	pinned map[*backend.Memory]cu.HostBuffer
	live   map[*backend.Memory]struct{}
	blocks []*scratchBlock // device scratch lent by scratch()
	stage  stagingPool     // pinned host memory for uploads and reads
	closed bool

	// The first failure, under its own lock: deferred launches report
	// on the device thread, which may run while a caller holds mu.
	emu sync.Mutex
	err error
}

type scratchBlock struct {
	ptr   cu.DevicePtr
	bytes int
	busy  bool
}

// New loads the kernel program on o.Device, creates the compute stream and
// a cuBLAS handle bound to it.
func New(o Options) (*Backend, error) {
	if o.Device == nil || o.Compiler == nil || o.BLAS == nil || o.Host == nil {
		return nil, fmt.Errorf("cuda backend: Options needs Device, Compiler, BLAS and Host")
	}
	k, err := kernels.LoadSet(o.Compiler, o.Device)
	if err != nil {
		return nil, fmt.Errorf("cuda backend on device %d: %w", o.Device.Info().Ordinal, err)
	}
	// Non-blocking: the legacy NULL stream (synchronous copies, other
	// libraries' default work) neither waits for the compute stream nor
	// holds it up. The backend's few synchronous copies order themselves
	// by the legacy event (afterLegacy).
	st, err := o.Device.NewStream(true)
	if err != nil {
		_ = k.Close()
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	legacy, err := o.Device.NewEvent(false)
	if err != nil {
		_ = o.Device.DestroyStream(st)
		_ = k.Close()
		return nil, fmt.Errorf("cuda backend: %w", err)
	}
	b := &Backend{dev: o.Device, stream: st, legacy: legacy, k: k, host: o.Host, tf32: o.AllowTF32,
		pinned: make(map[*backend.Memory]cu.HostBuffer), live: make(map[*backend.Memory]struct{})}
	// Kernel launches and GEMMs are deferred into the next trip to the
	// device thread (cuda.Device.Enqueue): a layer's launches cross
	// goroutines once, not once each. Their failures were the next Sync's
	// to report anyway.
	k.DeferLaunches(func(err error) { b.check("launch", err) })
	err = o.Device.Do(func(*cu.Ctx) error {
		h, err := o.BLAS.NewHandle()
		if err != nil {
			return err
		}
		if err := h.SetStream(st); err != nil {
			_ = h.Close()
			return err
		}
		b.blas = h
		return nil
	})
	if err != nil {
		_ = o.Device.DestroyEvent(legacy)
		_ = o.Device.DestroyStream(st)
		_ = k.Close()
		return nil, fmt.Errorf("cuda backend: cuBLAS handle: %w", err)
	}
	if o.BLASLt != nil {
		err = o.Device.Do(func(*cu.Ctx) error {
			h, err := o.BLASLt.NewHandle()
			b.lt = &ltState{h: h}
			return err
		})
		if err != nil {
			b.lt = nil
			_ = o.Device.Do(func(*cu.Ctx) error { return b.blas.Close() })
			_ = o.Device.DestroyEvent(legacy)
			_ = o.Device.DestroyStream(st)
			_ = k.Close()
			return nil, fmt.Errorf("cuda backend: cuBLASLt handle: %w", err)
		}
	}
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return fmt.Sprintf("cuda:%d", b.dev.Info().Ordinal) }

// Device is the GPU the Backend runs on.
func (b *Backend) Device() *cu.Device { return b.dev }

// Stream is the compute stream every op is queued on. A communicator
// orders its collectives after the work queued here (an event).
func (b *Backend) Stream() cu.Stream { return b.stream }

// Kernels is the loaded kernel program.
func (b *Backend) Kernels() *kernels.Set { return b.k }

// Close waits for queued work and releases every buffer still allocated,
// the scratch, the cuBLAS handle, the stream and the kernels.
func (b *Backend) Close() error {
	err := b.Sync()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return err
	}
	b.closed = true
	live := make([]*backend.Memory, 0, len(b.live))
	for m := range b.live {
		live = append(live, m)
	}
	blocks := b.blocks
	b.blocks = nil
	b.mu.Unlock()
	keep := func(e error) {
		if err == nil && e != nil {
			err = e
		}
	}
	for _, m := range live {
		keep(b.release(m))
	}
	for _, s := range blocks {
		keep(b.dev.Free(s.ptr))
	}
	b.mu.Lock()
	keep(b.stage.freeAll(b))
	b.mu.Unlock()
	keep(b.dev.Do(func(*cu.Ctx) error { return b.blas.Close() }))
	if b.lt != nil {
		keep(b.dev.Do(func(*cu.Ctx) error { return b.lt.h.Close() }))
		if b.lt.wsBytes > 0 {
			keep(b.dev.Free(b.lt.ws))
		}
	}
	keep(b.dev.DestroyEvent(b.legacy))
	keep(b.dev.DestroyStream(b.stream))
	keep(b.k.Close())
	return err
}

// check records the first failure of an op; Sync returns it.
func (b *Backend) check(op string, err error) {
	if err == nil {
		return
	}
	b.emu.Lock()
	if b.err == nil {
		b.err = fmt.Errorf("cuda backend %s: %w", op, err)
	}
	b.emu.Unlock()
}

// Sync implements backend.Backend. With nothing queued since the last
// wait for the stream it makes no driver call: a step's final Sync right
// after a read of the device costs nothing.
func (b *Backend) Sync() error {
	b.mu.Lock()
	snap := b.stage.beginWait()
	b.mu.Unlock()
	waited, err := b.dev.SyncIfQueued(b.stream)
	b.check("synchronize", err)
	if waited && err == nil {
		b.mu.Lock()
		b.stage.endWait(snap)
		b.mu.Unlock()
	}
	b.emu.Lock()
	defer b.emu.Unlock()
	return b.err
}

func isHost(p backend.Pool) bool { return p == backend.Host || p == backend.HostPinned }

// hostOp reports whether every non-zero buffer of an op lives in a host
// pool (run it on the host backend) rather than on the device. A mix is a
// caller bug: nothing moves data implicitly.
func (b *Backend) hostOp(op string, bufs ...backend.Buffer) bool {
	hosts, devs := 0, 0
	for _, x := range bufs {
		if x.IsNil() {
			continue
		}
		if isHost(x.Pool()) {
			hosts++
		} else {
			devs++
		}
	}
	if hosts > 0 && devs > 0 {
		panic("cuda: " + op + ": buffers in both host and device memory")
	}
	return hosts > 0
}

// t is a device buffer as a kernel argument.
func (b *Backend) t(op string, x backend.Buffer) kernels.Tensor {
	m := x.Mem()
	if m == nil {
		panic("cuda: " + op + ": zero Buffer")
	}
	if m.Freed {
		panic("cuda: " + op + ": use of a freed buffer")
	}
	if isHost(m.Pool) {
		panic("cuda: " + op + ": buffer is in host memory")
	}
	return kernels.Tensor{Ptr: cu.DevicePtr(m.Dev).Add(x.ByteOff()), DT: kernels.DType(x.DType())}
}

// scratch lends a device workspace of n elements of dt. Release it right
// after queueing the work that uses it: every op runs on the one compute
// stream, so the next borrower's work starts after this one's ends. When
// the device cannot supply it, the failure becomes the backend's error
// (Sync returns it) and ok is false: the op queues nothing.
func (b *Backend) scratch(dt kernels.DType, n int) (t kernels.Tensor, release func(), ok bool) {
	bytes := max(n*dt.Size(), 256)
	b.mu.Lock()
	var blk *scratchBlock
	for _, s := range b.blocks {
		if !s.busy && s.bytes >= bytes && (blk == nil || s.bytes < blk.bytes) {
			blk = s
		}
	}
	if blk != nil {
		blk.busy = true
	}
	b.mu.Unlock()
	if blk == nil {
		// Round up so a sequence of slightly growing requests reuses blocks.
		size := 1 << 12
		for size < bytes {
			size <<= 1
		}
		p, err := b.dev.Alloc(size)
		if err != nil {
			b.check("scratch", fmt.Errorf("allocate %d bytes of device workspace: %w", size, err))
			return kernels.Tensor{}, func() {}, false
		}
		blk = &scratchBlock{ptr: p, bytes: size, busy: true}
		b.mu.Lock()
		b.blocks = append(b.blocks, blk)
		b.stats.Current[backend.Device][backend.Workspace] += int64(size)
		b.notePeak(backend.Device)
		b.mu.Unlock()
	}
	return kernels.Tensor{Ptr: blk.ptr, DT: dt}, func() {
		b.mu.Lock()
		blk.busy = false
		b.mu.Unlock()
	}, true
}

// afterLegacy orders the compute stream after what the legacy NULL stream
// holds: a synchronous copy from pageable memory may return before its
// DMA reached the device, and the non-blocking compute stream does not
// wait for the NULL stream by itself. It runs on the device thread.
func (b *Backend) afterLegacy(c *cu.Ctx) error {
	if err := c.RecordEvent(b.legacy, 0); err != nil {
		return err
	}
	return c.StreamWaitEvent(b.stream, b.legacy)
}

// copyHtoD is a synchronous upload ordered before the compute stream's
// later work. The caller has waited for the stream before it, so no queued
// op still reads dst.
func (b *Backend) copyHtoD(dst cu.DevicePtr, src []byte) error {
	return b.dev.Do(func(c *cu.Ctx) error {
		if err := c.CopyHtoD(dst, src); err != nil {
			return err
		}
		return b.afterLegacy(c)
	})
}

// readDevice copies device bytes to dst after the work queued before it:
// an async copy into pinned staging and one wait for the stream (one host
// synchronisation, not a wait and then a blocking copy).
func (b *Backend) readDevice(dst []byte, src cu.DevicePtr) error {
	if len(dst) > maxStagedBytes {
		if err := b.dev.StreamSynchronize(b.stream); err != nil {
			return err
		}
		return b.dev.CopyDtoH(dst, src)
	}
	slot, err := b.stage.take(b, len(dst))
	if err != nil {
		return err
	}
	if err := b.dev.CopyDtoHAsync(slot.buf.Slice(0, len(dst)), src, b.stream); err != nil {
		b.released(slot)
		return err
	}
	// Held until its bytes are copied out: the wait below frees the slot
	// for other callers, which must not write it before then.
	b.mu.Lock()
	b.stage.issue(slot)
	slot.held = true
	b.mu.Unlock()
	err = b.waitStream()
	if err == nil {
		copy(dst, slot.buf.Bytes())
	}
	b.mu.Lock()
	slot.held = false
	b.mu.Unlock()
	return err
}

// compute is the cuBLAS compute type of a GEMM whose A and B are dt:
// fp32 accumulation always; fp32 inputs on TF32 tensor cores only when
// Options.AllowTF32 said so.
func (b *Backend) compute(dt kernels.DType) cublas.ComputeType {
	if dt == kernels.F32 && b.tf32 {
		return cublas.Compute32FFastTF32
	}
	return cublas.Compute32F
}

// gemm queues fn to run on the device thread with the cuBLAS handle,
// deferred like the kernel launches (cuda.Device.Enqueue); a failure
// becomes the backend's error. It returns nil: callers that must know at
// once use the device themselves.
func (b *Backend) gemm(fn func(h *cublas.Handle) error) error {
	b.dev.Enqueue(func(c *cu.Ctx) error {
		c.MarkQueued(b.stream)
		return fn(b.blas)
	}, func(err error) { b.check("gemm", err) })
	return nil
}
