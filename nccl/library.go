package nccl

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "gt_dl.h"
#include "gt_nccl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"unsafe"

	"github.com/gotrain/gotrain/internal/libsearch"
)

// Library is a loaded NCCL: its entry points and version. It is immutable
// and safe for concurrent use. The library stays loaded for the life of
// the process (communicators hold threads inside it).
type Library struct {
	fns     C.gt_nccl_fns
	path    string
	code    int
	version Version
	search  libsearch.Result
}

// Load finds and dlopens NCCL (LoadOptions.Library, else $GOTRAIN_LIBNCCL,
// else the candidates opts.Search lists: libnccl.so.2 on the loader path,
// in CUDA toolkits, conda and NVIDIA's pip wheels), resolves its symbols
// and reads its version. When nothing loads the error wraps
// ErrNotAvailable and is a *libsearch.Error naming every candidate and
// why it was not used. It needs no GPU.
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
		return nil, notAvailable(r)
	}
	l.search = r
	return l, nil
}

// loadFile opens one candidate and checks it is NCCL 2.
func loadFile(name string) (*Library, error) {
	lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
	defer C.free(unsafe.Pointer(lib))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if C.gt_dl_open(lib, &cname, 1, C.RTLD_NOW|C.RTLD_LOCAL) != 0 {
		return nil, fmt.Errorf("%s", C.GoString(&lib.err[0]))
	}
	l := &Library{path: C.GoString(&lib.path[0])}
	if p, err := filepath.EvalSymlinks(l.path); err == nil {
		l.path = p
	}
	lib.err[0] = 0
	if C.gt_nccl_resolve(lib, &l.fns) != 0 {
		err := fmt.Errorf("%s is not NCCL 2 (%s)", l.path, C.GoString(&lib.err[0]))
		C.gt_dl_close(lib)
		return nil, err
	}
	var v C.int
	if rc := C.gt_nccl_get_version(&l.fns, &v); rc != C.GT_ncclSuccess {
		return nil, l.err(rc, nil, "ncclGetVersion (%s)", l.path)
	}
	l.code = int(v)
	l.version = DecodeVersion(l.code)
	return l, nil
}

// Search is how the library was found: every candidate and its outcome.
func (l *Library) Search() libsearch.Result { return l.search }

// Path is the file that loaded, symlinks resolved.
func (l *Library) Path() string { return l.path }

// Version is the loaded NCCL's release.
func (l *Library) Version() Version { return l.version }

// VersionCode is ncclGetVersion's number as the library encodes it.
func (l *Library) VersionCode() int { return l.code }

// errBuf receives ncclGetLastError's text from the C call that failed.
type errBuf [512]C.char

func (b *errBuf) ptr() (*C.char, C.size_t) { return &b[0], C.size_t(len(b)) }

// err turns a result into nil or an *Error with NCCL's texts.
func (l *Library) err(rc C.gt_ncclResult_t, buf *errBuf, op string, args ...any) error {
	if rc == C.GT_ncclSuccess {
		return nil
	}
	e := &Error{Op: fmt.Sprintf(op, args...), Result: Result(rc)}
	if s := C.gt_nccl_get_error_string(&l.fns, rc); s != nil {
		e.Msg = C.GoString(s)
	}
	if buf != nil {
		e.Detail = C.GoString(&buf[0])
	}
	return e
}

// needs returns an ErrUnsupported error if the library lacks a call (fn is
// nil), naming the release that added it.
func (l *Library) needs(fn unsafe.Pointer, call, since string) error {
	if fn != nil {
		return nil
	}
	return fmt.Errorf("%w: %s needs NCCL %s or later, this is %v (%s)", ErrUnsupported, call, since, l.version, l.path)
}

// UniqueID makes a new communicator id (ncclGetUniqueId). Only one rank
// calls it; the others receive the bytes.
func (l *Library) UniqueID() (UniqueID, error) {
	var id C.gt_ncclUniqueId
	var buf errBuf
	p, n := buf.ptr()
	if err := l.err(C.gt_nccl_get_unique_id(&l.fns, &id, p, n), &buf, "ncclGetUniqueId"); err != nil {
		return UniqueID{}, err
	}
	var out UniqueID
	copy(out[:], unsafe.Slice((*byte)(unsafe.Pointer(&id.internal[0])), UniqueIDBytes))
	return out, nil
}

// GroupStart opens a group (ncclGroupStart): the calls until the matching
// GroupEnd are issued together, which Send/Recv pairs and one goroutine
// driving several communicators need. NCCL keeps group state per OS
// thread, so the caller must hold its thread (runtime.LockOSThread, or be
// inside cuda.Device.Do) until GroupEnd; Group does this for a function.
func (l *Library) GroupStart() error {
	var buf errBuf
	p, n := buf.ptr()
	return l.err(C.gt_nccl_group_start(&l.fns, p, n), &buf, "ncclGroupStart")
}

// GroupEnd closes the group GroupStart opened on this thread and issues
// its calls (ncclGroupEnd).
func (l *Library) GroupEnd() error {
	var buf errBuf
	p, n := buf.ptr()
	return l.err(C.gt_nccl_group_end(&l.fns, p, n), &buf, "ncclGroupEnd")
}

// Group runs fn between GroupStart and GroupEnd on one locked OS thread.
// GroupEnd runs even if fn fails, so that the group is closed; both errors
// are returned.
func (l *Library) Group(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := l.GroupStart(); err != nil {
		return err
	}
	ferr := fn()
	return errors.Join(ferr, l.GroupEnd())
}
