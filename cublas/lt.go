package cublas

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "gt_dl.h"
#include "gt_cublas.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/gotrain/gotrain/cuda"
)

// LtLibrary is a loaded cuBLASLt. It is immutable and safe for concurrent
// use, and stays loaded for the life of the process.
type LtLibrary struct {
	fns     C.gt_cublaslt_fns
	path    string
	version int
}

// LoadLt dlopens cuBLASLt (LoadOptions.Library, else $GOTRAIN_LIBCUBLASLT,
// else libcublasLt.so.13, .12, .11) and resolves the calls Matmul needs; a
// failure wraps ErrNotAvailable and says what was tried.
func LoadLt(opts LoadOptions) (*LtLibrary, error) {
	names, source := libraryNames(opts, EnvLtLibrary, defaultLtNames())
	lib, err := openLibrary(names)
	if err != nil {
		return nil, notAvailable("cuBLASLt", names, source, EnvLtLibrary, err.Error())
	}
	defer C.free(unsafe.Pointer(lib))
	l := &LtLibrary{path: realPath(C.GoString(&lib.path[0]))}
	lib.err[0] = 0
	if C.gt_cublaslt_resolve(lib, &l.fns) != 0 {
		return nil, notAvailable("cuBLASLt", names, source, EnvLtLibrary,
			fmt.Sprintf("%s lacks symbols gotrain needs: %s", l.path, C.GoString(&lib.err[0])))
	}
	l.version = int(C.gt_cublaslt_get_version(&l.fns))
	return l, nil
}

// Path is the file that loaded, symlinks resolved.
func (l *LtLibrary) Path() string { return l.path }

// Version decodes cublasLtGetVersion's CUBLASLT_VERSION
// (major*10000 + minor*100 + patch).
func (l *LtLibrary) Version() Version {
	return Version{Major: l.version / 10000, Minor: l.version / 100 % 100, Patch: l.version % 100}
}

// err is Library.err for cuBLASLt, which has no status strings of its own.
func (l *LtLibrary) err(st C.gt_cublasStatus_t, op string, args ...any) error {
	if st == C.GT_CUBLAS_STATUS_SUCCESS {
		return nil
	}
	return &Error{Op: fmt.Sprintf(op, args...), Status: Status(st)}
}

// LtHandle is a cuBLASLt handle. It is not safe for concurrent use; create
// and use it on the device's thread. Close releases it.
type LtHandle struct {
	lib *LtLibrary
	h   C.gt_cublasLtHandle_t
}

// NewHandle creates a cuBLASLt handle (cublasLtCreate).
func (l *LtLibrary) NewHandle() (*LtHandle, error) {
	h := &LtHandle{lib: l}
	if err := l.err(C.gt_cublaslt_create(&l.fns, &h.h), "cublasLtCreate"); err != nil {
		return nil, err
	}
	return h, nil
}

// Close destroys the handle; later calls, and a second Close, return
// ErrClosed.
func (h *LtHandle) Close() error {
	if h.h == nil {
		return ErrClosed
	}
	err := h.lib.err(C.gt_cublaslt_destroy(&h.lib.fns, h.h), "cublasLtDestroy")
	h.h = nil
	return err
}

// LtMatmul is one cuBLASLt product, column-major:
//
//	C = alpha·op(A)·op(B) + beta·C + bias,  op(A) M×K, op(B) K×N, C M×N
//
// where bias, if Bias is not 0, is a vector of M elements of C's type added
// to every column (CUBLASLT_EPILOGUE_BIAS). Types and compute types are
// those of GemmEx. The workspace, if any, must stay untouched until the
// stream has run the product.
type LtMatmul struct {
	TransA, TransB Op
	M, N, K        int
	Alpha, Beta    float32
	A, B, C        Matrix
	Bias           cuda.DevicePtr
	Workspace      cuda.DevicePtr
	WorkspaceBytes int
	Stream         cuda.Stream
	Compute        ComputeType
}

// Matmul runs p on p.Stream: one descriptor set, heuristic query and
// cublasLtMatmul, in a single cgo call. The error names the step that
// failed.
func (h *LtHandle) Matmul(p LtMatmul) error {
	if h.h == nil {
		return ErrClosed
	}
	if err := checkGemm("cublasLtMatmul", p.TransA, p.TransB, p.M, p.N, p.K, p.A, p.B, p.C, p.Compute); err != nil {
		return err
	}
	if p.WorkspaceBytes < 0 || (p.Workspace == 0) != (p.WorkspaceBytes == 0) {
		return fmt.Errorf("%w: cublasLtMatmul: workspace %#x of %d bytes", ErrInvalidArgument, uintptr(p.Workspace), p.WorkspaceBytes)
	}
	args := C.gt_cublaslt_matmul_args{
		transa: C.gt_cublasOperation_t(p.TransA), transb: C.gt_cublasOperation_t(p.TransB),
		m: C.uint64_t(p.M), n: C.uint64_t(p.N), k: C.uint64_t(p.K),
		alpha: C.float(p.Alpha), beta: C.float(p.Beta),
		A: C.uint64_t(p.A.Ptr), atype: C.gt_cudaDataType_t(p.A.Type), lda: C.int64_t(p.A.LD),
		B: C.uint64_t(p.B.Ptr), btype: C.gt_cudaDataType_t(p.B.Type), ldb: C.int64_t(p.B.LD),
		C: C.uint64_t(p.C.Ptr), ctype: C.gt_cudaDataType_t(p.C.Type), ldc: C.int64_t(p.C.LD),
		D:    C.uint64_t(p.C.Ptr),
		bias: C.uint64_t(p.Bias), workspace: C.uint64_t(p.Workspace), workspace_bytes: C.size_t(p.WorkspaceBytes),
		stream: C.uintptr_t(p.Stream), compute: C.gt_cublasComputeType_t(p.Compute),
	}
	var stage C.int
	st := C.gt_cublaslt_matmul(&h.lib.fns, h.h, &args, &stage)
	steps := [...]string{"", "cublasLtMatmulDesc*", "cublasLtMatrixLayoutCreate", "cublasLtMatmulPreference*",
		"cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul"}
	step := "cublasLtMatmul"
	if int(stage) > 0 && int(stage) < len(steps) {
		step = steps[stage]
	}
	epi := "DEFAULT"
	if p.Bias != 0 {
		epi = "BIAS"
	}
	return h.lib.err(st, "%s (%v%v m=%d n=%d k=%d, %v·%v→%v, epilogue %s)", step, p.TransA, p.TransB, p.M, p.N, p.K,
		p.A.Type, p.B.Type, p.C.Type, epi)
}

// MatmulRowMajor runs p with row-major matrices (element (i, j) at
// i·LD + j) and a bias of N elements added to every row, the shape of a
// linear layer's output: out[M×N] = in[M×K]·W + bias. It is Matmul on the
// transposes (C^T = op(B)^T·op(A)^T), where the bias runs down C^T's
// columns, as the epilogue wants.
func (h *LtHandle) MatmulRowMajor(p LtMatmul) error {
	p.TransA, p.TransB = p.TransB, p.TransA
	p.M, p.N = p.N, p.M
	p.A, p.B = p.B, p.A
	return h.Matmul(p)
}
