//go:build cgo

package blas

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "gt_dl.h"
#include "gt_cblas.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// openBLAS calls cblas_sgemm of a dlopened OpenBLAS. It is immutable after
// Load, and OpenBLAS's threaded builds accept concurrent calls, so it is
// safe for concurrent use.
type openBLAS struct {
	sgemm unsafe.Pointer // cblas_sgemm, in the library's memory
	info  Info
	// split is how many goroutines a large product is divided over, each
	// calling the library single-threaded (see Load).
	split int
	// big takes the dimensions beyond the library's C int.
	big *Go
}

var _ Impl = (*openBLAS)(nil)

// Load dlopens OpenBLAS and checks it, trying LoadOptions.Library, else
// $GOTRAIN_OPENBLAS, else the usual sonames. A library that is missing or
// lacks cblas_sgemm gives an error wrapping ErrNotAvailable that names
// every file tried and what to install.
//
// If OPENBLAS_CORETYPE is unset, Load first sets it from the CPU's features
// (see ChooseCoreType), because OpenBLAS reads it once, while the library
// initialises inside dlopen. A preset value is left alone.
//
// The library is then checked on a few small GEMMs against a float64
// reference. If it computes a wrong result, Load returns Gonum instead,
// with Info().Note saying why, and a nil error.
//
// Each product large enough to share is split into opts.Threads blocks
// of C, one goroutine each, and OpenBLAS runs single-threaded inside each
// (openblas_set_num_threads(1)), so the only threads computing are the
// Go runtime's.
//
// The library stays loaded for the life of the process (unloading OpenBLAS
// with its thread pool running is unsafe), and a second Load gets the same
// copy: its core type is fixed by the first, and the thread count set by
// the latest Load applies to every Impl it returned.
func Load(opts LoadOptions) (Impl, error) {
	names, source := libraryNames(opts)
	coreEnv := os.Getenv(EnvCoreType)
	chosen := ""
	if coreEnv == "" {
		if ct := ChooseCoreType(HostCPUFeatures()); ct != "" {
			if err := os.Setenv(EnvCoreType, ct); err != nil {
				return nil, fmt.Errorf("blas: set %s=%s: %w", EnvCoreType, ct, err)
			}
			chosen, coreEnv = ct, ct
		}
	}

	// No thread pool at all: OpenBLAS sizes it from OPENBLAS_NUM_THREADS
	// while it initialises inside dlopen, and a pool made there keeps
	// spinning in sched_yield (a tenth of a core through a training step
	// that never calls OpenBLAS) although openblas_set_num_threads(1) below
	// gives it no work. gotrain splits products over its own goroutines.
	if err := os.Setenv(EnvNumThreads, "1"); err != nil {
		return nil, fmt.Errorf("blas: set %s=1: %w", EnvNumThreads, err)
	}
	var lib C.gt_dl_lib
	cnames := make([]*C.char, len(names))
	for i, n := range names {
		cnames[i] = C.CString(n)
	}
	defer func() {
		for _, p := range cnames {
			C.free(unsafe.Pointer(p))
		}
	}()
	if C.gt_dl_open(&lib, &cnames[0], C.int(len(cnames)), C.RTLD_NOW|C.RTLD_LOCAL) != 0 {
		return nil, notAvailable(names, source, C.GoString(&lib.err[0]))
	}
	path := C.GoString(&lib.path[0])
	lib.err[0] = 0

	sym := func(name string) unsafe.Pointer {
		cs := C.CString(name)
		defer C.free(unsafe.Pointer(cs))
		return C.gt_dl_sym(&lib, cs)
	}
	sgemm := sym("cblas_sgemm")
	if sgemm == nil {
		return nil, notAvailable(names, source, fmt.Sprintf("%s is not a CBLAS library (%s)", path, C.GoString(&lib.err[0])))
	}
	// The openblas_* extras are absent from other CBLAS libraries a user may
	// point GOTRAIN_OPENBLAS at; without them only the reporting suffers.
	setThreads := sym("openblas_set_num_threads")
	getThreads := sym("openblas_get_num_threads")
	getCore := sym("openblas_get_corename")
	getConfig := sym("openblas_get_config")

	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// OpenBLAS runs single-threaded and we split each product over our own
	// goroutines: its pthreads pool spins and yields while waiting for
	// work, and on a machine with as many cores as Go workers that fought
	// the backend's goroutines for the CPU (14% of a training step in the
	// scheduler). A library without openblas_set_num_threads keeps its own
	// threading and gets one call at a time.
	split := threads
	libThreads := 1
	if setThreads != nil {
		C.gt_openblas_set_num_threads(setThreads, 1)
	} else {
		split = 1
		libThreads = threads
	}
	if getThreads != nil {
		libThreads = int(C.gt_openblas_get_num_threads(getThreads))
	}
	if libThreads > 1 {
		split = 1
		threads = libThreads
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	info := Info{
		Name:           "openblas",
		Library:        path,
		Threads:        threads,
		CoreTypeEnv:    coreEnv,
		CoreTypeChosen: chosen,
	}
	if getCore != nil {
		info.CoreType = strings.TrimSpace(C.GoString(C.gt_openblas_get_corename(getCore)))
	}
	if getConfig != nil {
		info.Config = strings.TrimSpace(C.GoString(C.gt_openblas_get_config(getConfig)))
	}

	return verify(&openBLAS{sgemm: sgemm, info: info, split: split, big: NewGo(threads)}), nil
}

// Info implements Impl.
func (o *openBLAS) Info() Info { return o.info }

// Sgemm implements Impl.
func (o *openBLAS) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if sgemmTrivial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) {
		return
	}
	// The library's integers are C int; a dimension beyond that is legal
	// for us, just not for it.
	for _, v := range [...]int{m, n, k, lda, ldb, ldc} {
		if v > math.MaxInt32 {
			o.big.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
			return
		}
	}
	if o.split <= 1 || m*n*k < splitWork {
		o.call(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	// Blocks of C along its longer side, aligned to 16 so each block's
	// kernel tiles stay whole; each block is an independent GEMM on
	// sub-slices of A or B.
	parts := min(o.split, (max(m, n)+15)/16)
	var wg sync.WaitGroup
	for w := range parts {
		block := func() {
			if m >= n {
				i0, i1 := cut(m, parts, w), cut(m, parts, w+1)
				aoff := i0 * lda
				if transA {
					aoff = i0
				}
				o.call(transA, transB, i1-i0, n, k, alpha, a[aoff:], lda, b, ldb, beta, c[i0*ldc:], ldc)
			} else {
				j0, j1 := cut(n, parts, w), cut(n, parts, w+1)
				boff := j0
				if transB {
					boff = j0 * ldb
				}
				o.call(transA, transB, m, j1-j0, k, alpha, a, lda, b[boff:], ldb, beta, c[j0:], ldc)
			}
		}
		if w == parts-1 {
			block()
		} else {
			wg.Go(block)
		}
	}
	wg.Wait()
}

// splitWork is the multiply-add count below which a product runs on the
// calling goroutine (attention's 64³ tiles do).
const splitWork = 1 << 21

// cut is where block w of parts starts in [0, size), in multiples of 16.
func cut(size, parts, w int) int {
	if w >= parts {
		return size
	}
	return min(size, (size*w/parts+15)/16*16)
}

// call is one cblas_sgemm on the calling thread; m, n, k > 0.
func (o *openBLAS) call(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ta, tb := C.gt_cblas_transpose(C.CblasNoTrans), C.gt_cblas_transpose(C.CblasNoTrans)
	if transA {
		ta = C.CblasTrans
	}
	if transB {
		tb = C.CblasTrans
	}
	// Pointers to the first elements of Go slices may be passed for the
	// duration of the call; OpenBLAS keeps none of them afterwards.
	// sgemmTrivial returned false, so m, n, k > 0 and every slice is
	// non-empty.
	C.gt_cblas_sgemm(o.sgemm, C.CblasRowMajor, ta, tb, C.int(m), C.int(n), C.int(k), C.float(alpha),
		(*C.float)(unsafe.Pointer(&a[0])), C.int(lda),
		(*C.float)(unsafe.Pointer(&b[0])), C.int(ldb), C.float(beta),
		(*C.float)(unsafe.Pointer(&c[0])), C.int(ldc))
}
