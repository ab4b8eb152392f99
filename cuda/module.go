package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include <stdlib.h>
#include "gt_cuda.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"unsafe"
)

// jitLogBytes bounds the JIT error log kept from a failed module load.
const jitLogBytes = 16 << 10

// LoadModule loads a CUBIN or PTX image (cuModuleLoadDataEx); for PTX the
// driver compiles for the device. A failure carries the driver's JIT log.
func (c *Ctx) LoadModule(image []byte) (Module, error) {
	if len(image) == 0 {
		return 0, fmt.Errorf("cuda: load module on device %d: empty image", c.d.info.Ordinal)
	}
	// PTX must be NUL-terminated and the driver may read the image during
	// the call only; a C copy with a trailing NUL serves both kinds.
	img := C.malloc(C.size_t(len(image) + 1))
	defer C.free(img)
	buf := unsafe.Slice((*byte)(img), len(image)+1)
	copy(buf, image)
	buf[len(image)] = 0
	logBuf := (*C.char)(C.malloc(jitLogBytes))
	defer C.free(unsafe.Pointer(logBuf))
	var h C.uintptr_t
	if r := C.gt_cuModuleLoadData(c.d.drv.sym.moduleLoadDataEx, &h, img, logBuf, jitLogBytes); r != C.CUDA_SUCCESS {
		e := c.err(r, "cuModuleLoadDataEx (%d-byte %s image, device %d)", len(image), imageKind(image), c.d.info.Ordinal).(*Error)
		e.Log = strings.TrimSpace(C.GoString(logBuf))
		return 0, e
	}
	return Module(h), nil
}

// imageKind names an image for error messages.
func imageKind(image []byte) string {
	if len(image) >= 4 && string(image[:4]) == "\x7fELF" {
		return "CUBIN"
	}
	return "PTX"
}

// UnloadModule unloads m; its functions become invalid.
func (c *Ctx) UnloadModule(m Module) error {
	if r := C.gt_cuModuleUnload(c.d.drv.sym.moduleUnload, C.uintptr_t(m)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuModuleUnload")
	}
	return nil
}

// Function looks up a kernel of m by its extern "C" name.
func (c *Ctx) Function(m Module, name string) (Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var h C.uintptr_t
	if r := C.gt_cuModuleGetFunction(c.d.drv.sym.moduleGetFunction, &h, C.uintptr_t(m), cs); r != C.CUDA_SUCCESS {
		return Function{}, c.err(r, "cuModuleGetFunction (%s)", name)
	}
	return Function{h: uintptr(h), name: name}, nil
}

// SetMaxDynamicSharedMemory lets f use up to bytes of dynamic shared
// memory per block; above 48 KiB a kernel must opt in this way, up to the
// device's MaxSharedPerBlockOptin.
func (c *Ctx) SetMaxDynamicSharedMemory(f Function, bytes int) error {
	if r := C.gt_cuFuncSetAttribute(c.d.drv.sym.funcSetAttribute, C.uintptr_t(f.h), C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(bytes)); r != C.CUDA_SUCCESS {
		return c.err(r, "cuFuncSetAttribute (%s, MAX_DYNAMIC_SHARED_SIZE_BYTES=%d)", f.name, bytes)
	}
	return nil
}

// Launch queues f on cfg.Stream with the given arguments, in the kernel's
// parameter order. Each argument must have the exact type of its parameter:
// DevicePtr for pointers, and int8..int64, uint8..uint64, float32, float64
// for scalars (Go's int and uint are refused: their C width is ambiguous).
// The values are copied into C memory for the call; launch failures that
// happen while the kernel runs surface at the next synchronisation.
func (c *Ctx) Launch(f Function, cfg LaunchConfig, args ...any) error {
	block, offs, err := packArgs(args)
	if err != nil {
		return fmt.Errorf("cuda: launch %s: %w", f.name, err)
	}
	var blockPtr unsafe.Pointer
	if len(block) > 0 {
		blockPtr = unsafe.Pointer(&block[0])
	}
	var offsPtr *C.size_t
	if len(offs) > 0 {
		offsPtr = (*C.size_t)(unsafe.Pointer(&offs[0]))
	}
	g, b := cfg.Grid.norm(), cfg.Block.norm()
	c.d.queued[cfg.Stream] = true
	r := C.gt_cuLaunchKernel(c.d.drv.sym.launchKernel, C.uintptr_t(f.h),
		C.uint(g.X), C.uint(g.Y), C.uint(g.Z), C.uint(b.X), C.uint(b.Y), C.uint(b.Z),
		C.uint(cfg.SharedMemBytes), C.uintptr_t(cfg.Stream), blockPtr, C.size_t(len(block)), offsPtr, C.int(len(offs)))
	if r != C.CUDA_SUCCESS {
		return c.err(r, "cuLaunchKernel (%s, grid %dx%dx%d, block %dx%dx%d, %d B shared)", f.name,
			g.X, g.Y, g.Z, b.X, b.Y, b.Z, cfg.SharedMemBytes)
	}
	return nil
}
