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
	"strings"
	"unsafe"

	"github.com/gotrain/gotrain/internal/libsearch"
)

// Library is a loaded cuBLAS: its entry points and version. It is
// immutable and safe for concurrent use. The library stays loaded for the
// life of the process, since handles may outlive any one caller.
type Library struct {
	fns     C.gt_cublas_fns
	path    string
	version Version
	search  libsearch.Result
}

// Load finds and dlopens cuBLAS (LoadOptions.Library, else
// $GOTRAIN_LIBCUBLAS, else the candidates opts.Search lists: libcublas.so.13,
// .12, .11 on the loader path, in CUDA toolkits, conda and NVIDIA's pip
// wheels, the newest CUDA major the driver runs first) and resolves every
// symbol gotrain uses. When nothing loads the error wraps ErrNotAvailable
// and is a *libsearch.Error naming every candidate and why it was not
// used. It needs no GPU: creating a handle is what needs one.
func Load(opts LoadOptions) (*Library, error) {
	var l *Library
	r, ok := opts.searcher().Load(Spec(), opts.Library, "LoadOptions.Library", func(c libsearch.Candidate) (string, error) {
		var err error
		l, err = loadFile(c.Name)
		if err != nil {
			return "", err
		}
		return l.path, nil
	})
	if !ok {
		return nil, notAvailable(r, EnvLibrary)
	}
	l.search = r
	return l, nil
}

// loadFile opens one candidate and checks it is a usable cuBLAS.
func loadFile(name string) (*Library, error) {
	lib, err := openLibrary(name)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(lib))
	l := &Library{path: realPath(C.GoString(&lib.path[0]))}
	lib.err[0] = 0
	if C.gt_cublas_resolve(lib, &l.fns) != 0 {
		err := fmt.Errorf("%s lacks symbols gotrain needs (cuBLAS older than 11?): %s", l.path, C.GoString(&lib.err[0]))
		C.gt_dl_close(lib)
		return nil, err
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

// Search is how the library was found: every candidate and its outcome.
func (l *Library) Search() libsearch.Result { return l.search }

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

// openLibrary dlopens name with the libraries it needs from its own
// directory loaded first (see preloadBeside). The struct is C memory the
// caller frees; the error carries dlerror's text.
func openLibrary(name string) (*C.gt_dl_lib, error) {
	preloadBeside(name)
	lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if C.gt_dl_open(lib, &cname, 1, C.RTLD_NOW|C.RTLD_LOCAL) != 0 {
		msg := C.GoString(&lib.err[0])
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("%s", msg)
	}
	return lib, nil
}

// preloadBeside loads libcublasLt of the same major from the directory of
// a libcublas path before libcublas itself: libcublas needs it, and a
// directory outside the loader path (a conda or pip one without an
// $ORIGIN run path) would otherwise leave the dependency unresolved, or
// resolve it to another release's copy on the loader path. The handle is
// kept for the life of the process, as cuBLAS's is.
func preloadBeside(name string) {
	if !strings.HasPrefix(name, "/") {
		return
	}
	dir, base := filepath.Split(name)
	major, ok := strings.CutPrefix(base, "libcublas.so.")
	if !ok {
		return
	}
	lt := filepath.Join(dir, "libcublasLt.so."+major)
	if _, err := os.Stat(lt); err != nil {
		return
	}
	lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
	defer C.free(unsafe.Pointer(lib))
	cname := C.CString(lt)
	defer C.free(unsafe.Pointer(cname))
	C.gt_dl_open(lib, &cname, 1, C.RTLD_NOW|C.RTLD_LOCAL) // best effort: libcublas's own open reports what is missing
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
