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
	"os"
	"path/filepath"
	"unsafe"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/internal/libsearch"
)

// LtLibrary is a loaded cuBLASLt. It is immutable and safe for concurrent
// use, and stays loaded for the life of the process.
type LtLibrary struct {
	fns     C.gt_cublaslt_fns
	path    string
	version int
	search  libsearch.Result
}

// LoadLt finds and dlopens cuBLASLt (LoadOptions.Library, else
// $GOTRAIN_LIBCUBLASLT, else the candidates opts.Search lists) and
// resolves the calls Matmul needs; a failure wraps ErrNotAvailable and
// says what was tried. Library.LoadLt takes the one beside a loaded cuBLAS.
func LoadLt(opts LoadOptions) (*LtLibrary, error) {
	return loadLt(opts.searcher(), LtSpec(), opts.Library, "LoadOptions.Library")
}

// LoadLt loads the cuBLASLt of l's release from l's directory ($GOTRAIN_LIBCUBLASLT
// still wins), searching as LoadLt does when that directory has none.
func (l *Library) LoadLt(opts LoadOptions) (*LtLibrary, error) {
	if opts.Library == "" && os.Getenv(EnvLtLibrary) == "" {
		if p := ltBeside(l.path, l.version.Major); p != "" {
			return loadLt(opts.searcher(), LtSpec(), p, "beside "+filepath.Base(l.path))
		}
	}
	return LoadLt(opts)
}

func loadLt(s *libsearch.Searcher, spec libsearch.Spec, given, from string) (*LtLibrary, error) {
	var l *LtLibrary
	r, ok := s.Load(spec, given, from, func(c libsearch.Candidate) (string, error) {
		lib, err := openLibrary(c.Name)
		if err != nil {
			return "", err
		}
		defer C.free(unsafe.Pointer(lib))
		l = &LtLibrary{path: realPath(C.GoString(&lib.path[0]))}
		lib.err[0] = 0
		if C.gt_cublaslt_resolve(lib, &l.fns) != 0 {
			err := fmt.Errorf("%s lacks symbols gotrain needs: %s", l.path, C.GoString(&lib.err[0]))
			C.gt_dl_close(lib)
			return "", err
		}
		l.version = int(C.gt_cublaslt_get_version(&l.fns))
		return l.path, nil
	})
	if !ok {
		return nil, notAvailable(r, EnvLtLibrary)
	}
	l.search = r
	return l, nil
}

// Search is how the library was found: every candidate and its outcome.
func (l *LtLibrary) Search() libsearch.Result { return l.search }

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

// LtHandle is a cuBLASLt handle with its cache of matmul plans: the
// descriptor, layouts and heuristic result of each product shape are made
// on the first Matmul of that shape and reused by every later one, which
// only sets its pointers. It is not safe for concurrent use; create and use
// it on the device's thread. Close releases it and its plans.
type LtHandle struct {
	lib   *LtLibrary
	h     C.gt_cublasLtHandle_t
	plans map[ltKey]*ltPlan
}

// maxLtPlans bounds the plan cache. A training run uses a few dozen
// shapes; a workload that cycles through more starts the cache afresh
// rather than growing without bound.
const maxLtPlans = 256

// ltKey is what a plan depends on: everything but the pointers, and the
// alignment of those (the heuristic picks algorithms for it).
type ltKey struct {
	transA, transB         Op
	m, n, k                int
	aType, bType, cType    DataType
	lda, ldb, ldc          int
	epilogue               uint32
	biasType               DataType
	auxLD                  int
	alignA, alignB, alignC uint32
	workspaceBytes         int
	compute                ComputeType
}

// ltPlan is a cached plan, or the failure making it gave (a product the
// library has no algorithm for stays unsupported).
type ltPlan struct {
	p   *C.gt_cublaslt_plan
	err error
}

// NewHandle creates a cuBLASLt handle (cublasLtCreate).
func (l *LtLibrary) NewHandle() (*LtHandle, error) {
	h := &LtHandle{lib: l, plans: make(map[ltKey]*ltPlan)}
	if err := l.err(C.gt_cublaslt_create(&l.fns, &h.h), "cublasLtCreate"); err != nil {
		return nil, withDriverHint(err, l.Version())
	}
	return h, nil
}

// Close destroys the cached plans and the handle; later calls, and a
// second Close, return ErrClosed.
func (h *LtHandle) Close() error {
	if h.h == nil {
		return ErrClosed
	}
	h.dropPlans()
	err := h.lib.err(C.gt_cublaslt_destroy(&h.lib.fns, h.h), "cublasLtDestroy")
	h.h = nil
	return err
}

func (h *LtHandle) dropPlans() {
	for k, p := range h.plans {
		if p.p != nil {
			C.gt_cublaslt_plan_destroy(&h.lib.fns, p.p)
		}
		delete(h.plans, k)
	}
}

// Plans is how many product shapes the handle holds plans (or cached
// failures) for.
func (h *LtHandle) Plans() int { return len(h.plans) }

// Vector is a vector in device memory (a bias) of Type elements.
type Vector struct {
	Ptr  cuda.DevicePtr
	Type DataType
}

// LtMatmul is one cuBLASLt product, column-major:
//
//	C = epilogue(alpha·op(A)·op(B) + beta·C + bias),  op(A) M×K, op(B) K×N, C M×N
//
// where bias, if Bias.Ptr is not 0, is a vector of M elements of Bias.Type
// added to every column (a BIAS epilogue; the type is always passed as
// CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, and the library says which types it
// takes with a result of C's type: C's own, documented for every version),
// and the epilogue applies the tanh GELU when GELU is set; Aux, if
// Aux.Ptr is not 0, then receives the GELU's input (an M×N matrix of C's
// type with leading dimension Aux.LD, a multiple of 8): the pre-activation
// a backward pass needs. Types and compute types are those of GemmEx. The
// workspace, if any, must stay untouched until the stream has run the
// product.
type LtMatmul struct {
	TransA, TransB Op
	M, N, K        int
	Alpha, Beta    float32
	A, B, C        Matrix
	Bias           Vector
	GELU           bool
	Aux            Matrix
	Workspace      cuda.DevicePtr
	WorkspaceBytes int
	Stream         cuda.Stream
	Compute        ComputeType
}

// epilogue is p's cublasLtEpilogue_t and its name.
func (p LtMatmul) epilogue() (uint32, string) {
	bias, aux := p.Bias.Ptr != 0, p.Aux.Ptr != 0
	switch {
	case p.GELU && aux && bias:
		return C.GT_CUBLASLT_EPILOGUE_GELU_AUX_BIAS, "GELU_AUX_BIAS"
	case p.GELU && aux:
		return C.GT_CUBLASLT_EPILOGUE_GELU_AUX, "GELU_AUX"
	case p.GELU && bias:
		return C.GT_CUBLASLT_EPILOGUE_GELU_BIAS, "GELU_BIAS"
	case p.GELU:
		return C.GT_CUBLASLT_EPILOGUE_GELU, "GELU"
	case bias:
		return C.GT_CUBLASLT_EPILOGUE_BIAS, "BIAS"
	}
	return C.GT_CUBLASLT_EPILOGUE_DEFAULT, "DEFAULT"
}

// alignOf is the alignment of a device address in bytes, at most 256 (the
// largest the heuristic asks about); a null pointer counts as aligned.
func alignOf(p cuda.DevicePtr) uint32 {
	a := uint32(256)
	for a > 1 && uint64(p)%uint64(a) != 0 {
		a >>= 1
	}
	return a
}

// checkLt rejects what cuBLASLt would refuse in p's epilogue arguments.
func checkLt(p LtMatmul) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: cublasLtMatmul: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if p.WorkspaceBytes < 0 || (p.Workspace == 0) != (p.WorkspaceBytes == 0) {
		return bad("workspace %#x of %d bytes", uintptr(p.Workspace), p.WorkspaceBytes)
	}
	if p.Aux.Ptr != 0 {
		switch {
		case !p.GELU:
			return bad("an aux buffer without the GELU epilogue")
		case p.Aux.Type != p.C.Type:
			return bad("aux of %v for a %v result: the GELU's input is stored in the result's type", p.Aux.Type, p.C.Type)
		case p.Aux.LD < max(1, p.M) || p.Aux.LD%8 != 0:
			return bad("aux leading dimension %d: want a multiple of 8 and at least M=%d", p.Aux.LD, p.M)
		}
	}
	return nil
}

// Matmul runs p on p.Stream: the plan for p's shape (made and cached on
// first use: descriptor, layouts, heuristic query) and cublasLtMatmul, in
// a single cgo call. The error names the step that failed; when that was
// making the plan it wraps ErrNoPlan, and later products of the shape
// return the same error without asking the library again.
func (h *LtHandle) Matmul(p LtMatmul) error {
	if h.h == nil {
		return ErrClosed
	}
	if err := checkGemm("cublasLtMatmul", p.TransA, p.TransB, p.M, p.N, p.K, p.A, p.B, p.C, p.Compute); err != nil {
		return err
	}
	if err := checkLt(p); err != nil {
		return err
	}
	epi, epiName := p.epilogue()
	desc := func(step string) string {
		return fmt.Sprintf("%s (%v%v m=%d n=%d k=%d, %v·%v→%v, epilogue %s)", step, p.TransA, p.TransB, p.M, p.N, p.K,
			p.A.Type, p.B.Type, p.C.Type, epiName)
	}
	steps := [...]string{"", "cublasLtMatmulDesc*", "cublasLtMatrixLayoutCreate", "cublasLtMatmulPreference*",
		"cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul", "cublasLtMatmulDescSetAttribute (pointers)"}
	step := func(stage C.int) string {
		if int(stage) > 0 && int(stage) < len(steps) {
			return steps[stage]
		}
		return "cublasLtMatmul"
	}
	key := ltKey{transA: p.TransA, transB: p.TransB, m: p.M, n: p.N, k: p.K,
		aType: p.A.Type, bType: p.B.Type, cType: p.C.Type, lda: p.A.LD, ldb: p.B.LD, ldc: p.C.LD,
		epilogue: epi, alignA: alignOf(p.A.Ptr), alignB: alignOf(p.B.Ptr), alignC: alignOf(p.C.Ptr),
		workspaceBytes: p.WorkspaceBytes, compute: p.Compute}
	if p.Bias.Ptr != 0 {
		key.biasType = p.Bias.Type
	}
	if p.Aux.Ptr != 0 {
		key.auxLD = p.Aux.LD
	}
	plan, ok := h.plans[key]
	if !ok {
		if len(h.plans) >= maxLtPlans {
			h.dropPlans()
		}
		args := C.gt_cublaslt_plan_args{
			transa: C.gt_cublasOperation_t(p.TransA), transb: C.gt_cublasOperation_t(p.TransB),
			m: C.uint64_t(p.M), n: C.uint64_t(p.N), k: C.uint64_t(p.K),
			atype: C.gt_cudaDataType_t(p.A.Type), btype: C.gt_cudaDataType_t(p.B.Type), ctype: C.gt_cudaDataType_t(p.C.Type),
			lda: C.int64_t(p.A.LD), ldb: C.int64_t(p.B.LD), ldc: C.int64_t(p.C.LD),
			epilogue: C.uint32_t(epi), bias_type: C.gt_cudaDataType_t(p.Bias.Type), aux_ld: C.int64_t(p.Aux.LD),
			align_a: C.uint32_t(key.alignA), align_b: C.uint32_t(key.alignB),
			// D is C: both get C's alignment.
			align_c: C.uint32_t(key.alignC), align_d: C.uint32_t(key.alignC),
			workspace_bytes: C.uint64_t(p.WorkspaceBytes), compute: C.gt_cublasComputeType_t(p.Compute),
		}
		plan = &ltPlan{p: new(C.gt_cublaslt_plan)}
		var stage C.int
		if st := C.gt_cublaslt_plan_create(&h.lib.fns, h.h, &args, plan.p, &stage); st != C.GT_CUBLAS_STATUS_SUCCESS {
			plan.p, plan.err = nil, fmt.Errorf("%w: %w", ErrNoPlan, h.lib.err(st, "%s", desc(step(stage))))
		}
		h.plans[key] = plan
	}
	if plan.err != nil {
		return plan.err
	}
	var stage C.int
	st := C.gt_cublaslt_plan_run(&h.lib.fns, h.h, plan.p, C.float(p.Alpha), C.float(p.Beta),
		C.uint64_t(p.A.Ptr), C.uint64_t(p.B.Ptr), C.uint64_t(p.C.Ptr), C.uint64_t(p.C.Ptr),
		C.uint64_t(p.Bias.Ptr), C.uint64_t(p.Aux.Ptr), C.uint64_t(p.Workspace), C.size_t(p.WorkspaceBytes),
		C.uintptr_t(p.Stream), &stage)
	return h.lib.err(st, "%s", desc(step(stage)))
}

// MatmulRowMajor runs p with row-major matrices (element (i, j) at
// i·LD + j) and a bias of N elements added to every row, the shape of a
// linear layer's output: out[M×N] = in[M×K]·W + bias. It is Matmul on the
// transposes (C^T = op(B)^T·op(A)^T), where the bias runs down C^T's
// columns, as the epilogue wants; an aux buffer is laid out as C.
func (h *LtHandle) MatmulRowMajor(p LtMatmul) error {
	p.TransA, p.TransB = p.TransB, p.TransA
	p.M, p.N = p.N, p.M
	p.A, p.B = p.B, p.A
	return h.Matmul(p)
}
