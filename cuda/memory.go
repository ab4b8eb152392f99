package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include "gt_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Alloc allocates bytes of device memory (cuMemAlloc_v2; 256-byte aligned).
func (c *Ctx) Alloc(bytes int) (DevicePtr, error) {
	if bytes <= 0 {
		return 0, fmt.Errorf("cuda: alloc %d bytes on device %d: size must be positive", bytes, c.d.info.Ordinal)
	}
	var p C.CUdeviceptr
	if r := C.gt_cuMemAlloc(c.d.drv.sym.memAlloc, &p, C.size_t(bytes)); r != C.CUDA_SUCCESS {
		return 0, c.err(r, "cuMemAlloc_v2 (%d bytes, device %d)", bytes, c.d.info.Ordinal)
	}
	return DevicePtr(p), nil
}

// Free frees memory from Alloc.
func (c *Ctx) Free(p DevicePtr) error {
	if r := C.gt_cuMemFree(c.d.drv.sym.memFree, C.CUdeviceptr(p)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemFree_v2 (%#x)", uintptr(p))
	}
	return nil
}

// MemInfo is the device's free and total memory in bytes.
func (c *Ctx) MemInfo() (free, total uint64, err error) {
	var f, t C.size_t
	if r := C.gt_cuMemGetInfo(c.d.drv.sym.memGetInfo, &f, &t); r != C.CUDA_SUCCESS {
		return 0, 0, c.err(r, "cuMemGetInfo_v2 (device %d)", c.d.info.Ordinal)
	}
	return uint64(f), uint64(t), nil
}

// AllocHost allocates bytes of pinned host memory (cuMemAllocHost_v2).
func (c *Ctx) AllocHost(bytes int) (HostBuffer, error) {
	if bytes <= 0 {
		return HostBuffer{}, fmt.Errorf("cuda: alloc %d pinned host bytes: size must be positive", bytes)
	}
	var p unsafe.Pointer
	if r := C.gt_cuMemAllocHost(c.d.drv.sym.memAllocHost, &p, C.size_t(bytes)); r != C.CUDA_SUCCESS {
		return HostBuffer{}, c.err(r, "cuMemAllocHost_v2 (%d bytes)", bytes)
	}
	return HostBuffer{p: p, n: bytes}, nil
}

// FreeHost frees memory from AllocHost (the whole allocation, not a Slice).
func (c *Ctx) FreeHost(h HostBuffer) error {
	if r := C.gt_cuMemFreeHost(c.d.drv.sym.memFreeHost, h.p); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemFreeHost (%d bytes)", h.n)
	}
	return nil
}

// CopyHtoD copies len(src) bytes from host to device and returns when done;
// src may be Go memory.
func (c *Ctx) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if r := C.gt_cuMemcpyHtoD(c.d.drv.sym.memcpyHtoD, C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemcpyHtoD_v2 (%d bytes to %#x)", len(src), uintptr(dst))
	}
	return nil
}

// CopyDtoH copies len(dst) bytes from device to host and returns when done;
// dst may be Go memory.
func (c *Ctx) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if r := C.gt_cuMemcpyDtoH(c.d.drv.sym.memcpyDtoH, unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemcpyDtoH_v2 (%d bytes from %#x)", len(dst), uintptr(src))
	}
	return nil
}

// CopyDtoD copies bytes between device buffers.
func (c *Ctx) CopyDtoD(dst, src DevicePtr, bytes int) error {
	if r := C.gt_cuMemcpyDtoD(c.d.drv.sym.memcpyDtoD, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(bytes)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemcpyDtoD_v2 (%d bytes %#x to %#x)", bytes, uintptr(src), uintptr(dst))
	}
	return nil
}

// CopyHtoDAsync queues a copy of src (pinned memory, which must stay
// allocated until the copy is done) to dst on s.
func (c *Ctx) CopyHtoDAsync(dst DevicePtr, src HostBuffer, s Stream) error {
	c.d.queued[s] = true
	if src.n == 0 {
		return nil
	}
	if r := C.gt_cuMemcpyHtoDAsync(c.d.drv.sym.memcpyHtoDAsync, C.CUdeviceptr(dst), src.p, C.size_t(src.n), C.uintptr_t(s)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemcpyHtoDAsync_v2 (%d bytes to %#x)", src.n, uintptr(dst))
	}
	return nil
}

// CopyDtoHAsync queues a copy of dst.Len() bytes from src into dst (pinned
// memory) on s; dst holds the data once s has reached this point.
func (c *Ctx) CopyDtoHAsync(dst HostBuffer, src DevicePtr, s Stream) error {
	c.d.queued[s] = true
	if dst.n == 0 {
		return nil
	}
	if r := C.gt_cuMemcpyDtoHAsync(c.d.drv.sym.memcpyDtoHAsync, dst.p, C.CUdeviceptr(src), C.size_t(dst.n), C.uintptr_t(s)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemcpyDtoHAsync_v2 (%d bytes from %#x)", dst.n, uintptr(src))
	}
	return nil
}

// CopyDtoDAsync queues a device-to-device copy on s.
func (c *Ctx) CopyDtoDAsync(dst, src DevicePtr, bytes int, s Stream) error {
	c.d.queued[s] = true
	if r := C.gt_cuMemcpyDtoDAsync(c.d.drv.sym.memcpyDtoDAsync, C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(bytes), C.uintptr_t(s)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemcpyDtoDAsync_v2 (%d bytes %#x to %#x)", bytes, uintptr(src), uintptr(dst))
	}
	return nil
}

// MemsetD8 sets n bytes at p to v.
func (c *Ctx) MemsetD8(p DevicePtr, v byte, n int) error {
	if r := C.gt_cuMemsetD8(c.d.drv.sym.memsetD8, C.CUdeviceptr(p), C.uchar(v), C.size_t(n)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemsetD8_v2 (%d bytes at %#x)", n, uintptr(p))
	}
	return nil
}

// MemsetD32 sets n 32-bit words at p (4-byte aligned) to v; with
// math.Float32bits it fills float32 buffers.
func (c *Ctx) MemsetD32(p DevicePtr, v uint32, n int) error {
	if r := C.gt_cuMemsetD32(c.d.drv.sym.memsetD32, C.CUdeviceptr(p), C.uint(v), C.size_t(n)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemsetD32_v2 (%d words at %#x)", n, uintptr(p))
	}
	return nil
}

// MemsetD8Async queues setting n bytes at p to v on s.
func (c *Ctx) MemsetD8Async(p DevicePtr, v byte, n int, s Stream) error {
	c.d.queued[s] = true
	if r := C.gt_cuMemsetD8Async(c.d.drv.sym.memsetD8Async, C.CUdeviceptr(p), C.uchar(v), C.size_t(n), C.uintptr_t(s)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuMemsetD8Async (%d bytes at %#x)", n, uintptr(p))
	}
	return nil
}
