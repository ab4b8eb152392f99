package cuda

import (
	"fmt"
	"unsafe"
)

// DevicePtr is a device address (CUdeviceptr). Go never dereferences it;
// Add offsets it by bytes.
type DevicePtr uintptr

// Add returns p offset by bytes.
func (p DevicePtr) Add(bytes int) DevicePtr { return p + DevicePtr(bytes) }

// Stream is a CUstream handle; the zero Stream is the context's default
// (legacy, synchronising) stream. cuBLAS and NCCL take it as their
// cudaStream_t, which is the same type.
type Stream uintptr

// Event is a CUevent handle.
type Event uintptr

// Module is a loaded CUmodule.
type Module uintptr

// Function is a kernel of a loaded module.
type Function struct {
	h    uintptr
	name string
}

// Name is the kernel's (unmangled, extern "C") name.
func (f Function) Name() string { return f.name }

// Dim3 is a grid or block size; a zero component counts as 1.
type Dim3 struct{ X, Y, Z uint32 }

func (d Dim3) norm() Dim3 {
	if d.X == 0 {
		d.X = 1
	}
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// LaunchConfig is the launch geometry of one kernel call.
type LaunchConfig struct {
	Grid, Block    Dim3
	SharedMemBytes uint32 // dynamic shared memory per block
	Stream         Stream
}

// HostBuffer is pinned (page-locked) host memory from AllocHost: C memory,
// so it may be the source or target of an async copy. Bytes views it; the
// view is invalid after FreeHost.
type HostBuffer struct {
	p unsafe.Pointer
	n int
}

// Len is the buffer's size in bytes.
func (h HostBuffer) Len() int { return h.n }

// Bytes returns the buffer's memory as a byte slice (nil for an empty one).
func (h HostBuffer) Bytes() []byte {
	if h.p == nil || h.n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(h.p), h.n)
}

// Slice returns bytes [off, off+n) of h, sharing its memory; it panics if
// the range is outside h (a caller bug).
func (h HostBuffer) Slice(off, n int) HostBuffer {
	if off < 0 || n < 0 || off+n > h.n {
		panic("cuda: HostBuffer.Slice out of range")
	}
	return HostBuffer{p: unsafe.Add(h.p, off), n: n}
}

// Elem are the element types Bytes views as bytes: fixed-size numbers with
// no pointers inside.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// Bytes views s's memory as bytes (no copy), for the copy calls.
func Bytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// DeviceInfo describes one device as the driver reports it; it needs no
// context.
type DeviceInfo struct {
	Ordinal          int    `json:"ordinal"`
	Name             string `json:"name"`
	PCIBusID         string `json:"pci_bus_id"`
	Major            int    `json:"cc_major"` // compute capability
	Minor            int    `json:"cc_minor"`
	Multiprocessors  int    `json:"multiprocessors"`
	TotalMemoryBytes uint64 `json:"total_memory_bytes"`
	// MaxSharedPerBlockOptin is the dynamic shared memory a kernel may use
	// after SetMaxDynamicSharedMemory.
	MaxSharedPerBlockOptin int `json:"max_shared_per_block_optin"`
}

// SM is the compute capability as major*10+minor (80 for 8.0), the number
// in sm_XY.
func (d DeviceInfo) SM() int { return d.Major*10 + d.Minor }

// String is a one-line summary, e.g. "0: NVIDIA A100-SXM4-40GB, sm_80, 40.0 GiB, 108 SMs, 0000:07:00.0".
func (d DeviceInfo) String() string {
	return fmt.Sprintf("%d: %s, sm_%d, %.1f GiB, %d SMs, %s", d.Ordinal, d.Name, d.SM(),
		float64(d.TotalMemoryBytes)/(1<<30), d.Multiprocessors, d.PCIBusID)
}
