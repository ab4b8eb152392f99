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
	"path/filepath"
	"unsafe"
)

// Library is a loaded cuBLAS: its entry points and version. It is
// immutable and safe for concurrent use. The library stays loaded for the
// life of the process, since handles may outlive any one caller.
type Library struct {
	fns     C.gt_cublas_fns
	path    string
	version Version
}

// Load dlopens cuBLAS (LoadOptions.Library, else $GOTRAIN_LIBCUBLAS, else
// libcublas.so.13, .12, .11) and resolves every symbol gotrain uses. A
// library that is missing or lacks a symbol gives an error wrapping
// ErrNotAvailable that names every file tried and what to install. It
// needs no GPU: creating a handle is what needs one.
func Load(opts LoadOptions) (*Library, error) {
	names, source := libraryNames(opts, EnvLibrary, defaultNames())
	lib, err := openLibrary(names)
	if err != nil {
		return nil, notAvailable("cuBLAS", names, source, EnvLibrary, err.Error())
	}
	defer C.free(unsafe.Pointer(lib))
	l := &Library{path: realPath(C.GoString(&lib.path[0]))}
	lib.err[0] = 0
	if C.gt_cublas_resolve(lib, &l.fns) != 0 {
		return nil, notAvailable("cuBLAS", names, source, EnvLibrary,
			fmt.Sprintf("%s lacks symbols gotrain needs (cuBLAS older than 11?): %s", l.path, C.GoString(&lib.err[0])))
	}
	var v [3]C.int
	for i, prop := range [...]C.gt_libraryPropertyType_t{C.GT_MAJOR_VERSION, C.GT_MINOR_VERSION, C.GT_PATCH_LEVEL} {
		if st := C.gt_cublas_get_property(&l.fns, prop, &v[i]); st != C.GT_CUBLAS_STATUS_SUCCESS {
			return nil, l.err(st, "cublasGetProperty(%d) (%s)", int(prop), l.path)
		}
	}
	l.version = Version{Major: int(v[0]), Minor: int(v[1]), Patch: int(v[2])}
	return l, nil
}

// Path is the file that loaded, symlinks resolved.
func (l *Library) Path() string { return l.path }

// Version is cuBLAS's version from cublasGetProperty.
func (l *Library) Version() Version { return l.version }

// err turns a status into nil or an *Error carrying the library's text.
func (l *Library) err(st C.gt_cublasStatus_t, op string, args ...any) error {
	if st == C.GT_CUBLAS_STATUS_SUCCESS {
		return nil
	}
	e := &Error{Op: fmt.Sprintf(op, args...), Status: Status(st)}
	if s := C.gt_cublas_status_string(&l.fns, st); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

// openLibrary dlopens the first of names that loads. The struct is C
// memory the caller frees; on failure the error lists every name's
// dlerror text.
func openLibrary(names []string) (*C.gt_dl_lib, error) {
	lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
	cnames := make([]*C.char, len(names))
	for i, n := range names {
		cnames[i] = C.CString(n)
	}
	defer func() {
		for _, p := range cnames {
			C.free(unsafe.Pointer(p))
		}
	}()
	// cnames holds C pointers only, so Go memory may be passed here.
	if C.gt_dl_open(lib, &cnames[0], C.int(len(cnames)), C.RTLD_NOW|C.RTLD_LOCAL) != 0 {
		msg := C.GoString(&lib.err[0])
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("%s", msg)
	}
	return lib, nil
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
