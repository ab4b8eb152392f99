package backend

import "fmt"

// Pool says where a Buffer's memory lives. The CPU backend's Device pool is
// host memory, accounted separately, so a CPU run reports what a GPU run would
// hold on the device.
type Pool uint8

const (
	Device     Pool = iota // GPU memory (CPU backend: host memory accounted as device)
	HostPinned             // page-locked host memory, the target of offload
	Host                   // ordinary host memory
	numPools
)

func (p Pool) String() string {
	switch p {
	case Device:
		return "device"
	case HostPinned:
		return "host_pinned"
	case Host:
		return "host"
	}
	return fmt.Sprintf("Pool(%d)", uint8(p))
}

// Pools lists every pool, in order.
func Pools() []Pool { return []Pool{Device, HostPinned, Host} }

// Category tags an allocation with what it holds, so every rank can report
// exactly where its memory goes.
type Category uint8

const (
	Params Category = iota
	Grads
	Master
	Optimizer
	Activations
	Comm
	Workspace
	numCategories
)

func (c Category) String() string {
	switch c {
	case Params:
		return "params"
	case Grads:
		return "grads"
	case Master:
		return "master"
	case Optimizer:
		return "optimizer"
	case Activations:
		return "activations"
	case Comm:
		return "comm"
	case Workspace:
		return "workspace"
	}
	return fmt.Sprintf("Category(%d)", uint8(c))
}

// Categories lists every category, in order.
func Categories() []Category {
	return []Category{Params, Grads, Master, Optimizer, Activations, Comm, Workspace}
}

// Memory is one allocation made by a Backend. Exactly one of Host and Dev is
// used: Host for memory the CPU can address directly (every pool of the CPU
// backend, the pinned pool of the CUDA backend), Dev for a device pointer.
// Only Backend implementations touch its fields.
type Memory struct {
	Host  []byte
	Dev   uintptr
	Pool  Pool
	Cat   Category
	Bytes int
	Freed bool
}

// Buffer is a typed view of Len elements starting at element Off of an
// allocation. It is a small value: copying it copies the view, not the data.
// Buffers never expose a Go slice; host code reads and writes them through a
// Backend's explicit copies.
type Buffer struct {
	mem   *Memory
	dtype DType
	off   int // elements
	n     int // elements
}

// NewBuffer is for Backend implementations: it wraps an allocation they made.
func NewBuffer(mem *Memory, dt DType, n int) Buffer {
	if n < 0 || n*dt.Size() > mem.Bytes {
		panic("backend: buffer larger than its memory")
	}
	return Buffer{mem: mem, dtype: dt, n: n}
}

// Mem is for Backend implementations: the allocation under the view.
func (b Buffer) Mem() *Memory { return b.mem }

// DType is the element type.
func (b Buffer) DType() DType { return b.dtype }

// Len is the number of elements.
func (b Buffer) Len() int { return b.n }

// Off is the view's first element within its allocation.
func (b Buffer) Off() int { return b.off }

// Bytes is the size of the view in bytes.
func (b Buffer) Bytes() int { return b.n * b.dtype.Size() }

// ByteOff is the view's first byte within its allocation.
func (b Buffer) ByteOff() int { return b.off * b.dtype.Size() }

// Pool is where the memory lives.
func (b Buffer) Pool() Pool {
	if b.mem == nil {
		return Host
	}
	return b.mem.Pool
}

// Category is what the allocation holds.
func (b Buffer) Category() Category {
	if b.mem == nil {
		return Workspace
	}
	return b.mem.Cat
}

// IsNil reports whether b is the zero Buffer (e.g. an absent bias).
func (b Buffer) IsNil() bool { return b.mem == nil }

// Slice returns the view of n elements starting at element off of b.
func (b Buffer) Slice(off, n int) Buffer {
	if off < 0 || n < 0 || off+n > b.n {
		panic("backend: slice out of range")
	}
	return Buffer{mem: b.mem, dtype: b.dtype, off: b.off + off, n: n}
}

// Same reports whether a and b view the same allocation.
func Same(a, b Buffer) bool { return a.mem == b.mem }

func (b Buffer) String() string {
	return fmt.Sprintf("Buffer{%s[%d] +%d %s/%s}", b.dtype, b.n, b.off, b.Pool(), b.Category())
}
