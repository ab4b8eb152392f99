package cublas

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include "gt_dl.h"
#include "gt_cublas.h"
*/
import "C"

import (
	"fmt"

	"github.com/gotrain/gotrain/cuda"
)

// Handle is a cuBLAS handle (cublasHandle_t) with its stream, workspace and
// math mode. It is not safe for concurrent use; create and use it on the
// device's thread (see the package doc). Close releases it.
type Handle struct {
	lib *Library
	h   C.gt_cublasHandle_t
}

// NewHandle creates a handle (cublasCreate_v2) in the calling thread's
// current context. Without a usable GPU cuBLAS answers
// CUBLAS_STATUS_NOT_INITIALIZED.
func (l *Library) NewHandle() (*Handle, error) {
	h := &Handle{lib: l}
	if err := l.err(C.gt_cublas_create(&l.fns, &h.h), "cublasCreate_v2"); err != nil {
		return nil, withDriverHint(err, l.version)
	}
	return h, nil
}

// Close destroys the handle (cublasDestroy_v2); later calls return
// ErrClosed, and so does a second Close.
func (h *Handle) Close() error {
	if h.h == nil {
		return ErrClosed
	}
	err := h.lib.err(C.gt_cublas_destroy(&h.lib.fns, h.h), "cublasDestroy_v2")
	h.h = nil
	return err
}

// Library is the library the handle came from.
func (h *Handle) Library() *Library { return h.lib }

// Version is cublasGetVersion_v2's number, the library's CUBLAS_VERSION
// (major*10000 + minor*100 + patch in CUDA 11 and later).
func (h *Handle) Version() (int, error) {
	if h.h == nil {
		return 0, ErrClosed
	}
	var v C.int
	if err := h.lib.err(C.gt_cublas_get_version(&h.lib.fns, h.h, &v), "cublasGetVersion_v2"); err != nil {
		return 0, err
	}
	return int(v), nil
}

// SetStream makes the handle's calls run on s (cublasSetStream_v2); the
// zero Stream is the default stream.
func (h *Handle) SetStream(s cuda.Stream) error {
	if h.h == nil {
		return ErrClosed
	}
	return h.lib.err(C.gt_cublas_set_stream(&h.lib.fns, h.h, C.uintptr_t(s)), "cublasSetStream_v2")
}

// Stream is the handle's stream (cublasGetStream_v2).
func (h *Handle) Stream() (cuda.Stream, error) {
	if h.h == nil {
		return 0, ErrClosed
	}
	var s C.uintptr_t
	if err := h.lib.err(C.gt_cublas_get_stream(&h.lib.fns, h.h, &s), "cublasGetStream_v2"); err != nil {
		return 0, err
	}
	return cuda.Stream(s), nil
}

// WorkspaceAlign is the alignment cuBLAS requires of a user workspace.
const WorkspaceAlign = 256

// SetWorkspace gives the handle bytes of device memory at p as scratch
// (cublasSetWorkspace_v2), instead of its own pool; the caller keeps the
// memory alive and unused by others while the handle may run. p must be
// aligned to WorkspaceAlign bytes. (0, 0) returns to cuBLAS's own pool.
// The cuBLAS documentation recommends 32 MiB on Hopper and 4 MiB on other
// GPUs.
func (h *Handle) SetWorkspace(p cuda.DevicePtr, bytes int) error {
	if h.h == nil {
		return ErrClosed
	}
	if bytes < 0 || (p == 0) != (bytes == 0) || p%WorkspaceAlign != 0 {
		return fmt.Errorf("%w: cublasSetWorkspace_v2: workspace %#x of %d bytes (want a %d-byte aligned pointer and a positive size, or 0 and 0)",
			ErrInvalidArgument, uintptr(p), bytes, WorkspaceAlign)
	}
	return h.lib.err(C.gt_cublas_set_workspace(&h.lib.fns, h.h, C.uint64_t(p), C.size_t(bytes)),
		"cublasSetWorkspace_v2 (%d bytes)", bytes)
}

// SetMathMode sets the handle's math mode (cublasSetMathMode).
func (h *Handle) SetMathMode(m MathMode) error {
	if h.h == nil {
		return ErrClosed
	}
	return h.lib.err(C.gt_cublas_set_math_mode(&h.lib.fns, h.h, C.gt_cublasMath_t(m)), "cublasSetMathMode(%d)", int(m))
}

// MathMode is the handle's math mode (cublasGetMathMode).
func (h *Handle) MathMode() (MathMode, error) {
	if h.h == nil {
		return 0, ErrClosed
	}
	var m C.gt_cublasMath_t
	if err := h.lib.err(C.gt_cublas_get_math_mode(&h.lib.fns, h.h, &m), "cublasGetMathMode"); err != nil {
		return 0, err
	}
	return MathMode(m), nil
}
