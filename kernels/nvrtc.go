package kernels

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "gt_dl.h"
#include "gt_nvrtc.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/gotrain/gotrain/internal/libsearch"
)

// EnvNVRTC names the libnvrtc file to load (a path or a soname); when set
// it is the only name tried.
const EnvNVRTC = "GOTRAIN_LIBNVRTC"

// ErrNVRTCNotAvailable is wrapped by LoadNVRTC's error when no usable NVRTC
// could be loaded.
var ErrNVRTCNotAvailable = errors.New("kernels: NVRTC not available")

// nvrtcNames are the sonames of CUDA 13, 12 and 11.2-11.8, newest first.
var nvrtcNames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"}

const nvrtcInstallHint = "install NVRTC (Debian: enable non-free, apt-get install libnvrtc11.2; " +
	"Ubuntu with NVIDIA's repository: cuda-nvrtc-12-x; pip: nvidia-cuda-nvrtc-cu12) or set " + EnvNVRTC + " to the file"

// NVRTCOptions configures LoadNVRTC. The zero value is usable.
type NVRTCOptions struct {
	// Library, if set, is the only file tried, ahead of $GOTRAIN_LIBNVRTC.
	Library string
	// Search finds the library where no override names one; nil searches
	// as libsearch.FromEnv(0) does.
	Search *libsearch.Searcher
}

// NVRTCSpec is NVRTC for libsearch: its sonames and NVIDIA's CUDA 12 wheel
// directory (CUDA 13's is nvidia/cu13/lib).
func NVRTCSpec() libsearch.Spec {
	return libsearch.Spec{Name: "NVRTC", Env: EnvNVRTC, Sonames: slices.Clone(nvrtcNames), Wheels: []string{"cuda_nvrtc/lib"}}
}

// NVRTC is a loaded NVRTC library. Compilations are serialised (older
// NVRTC releases do not promise thread safety); otherwise it is immutable.
type NVRTC struct {
	getErrorString, create, destroy, compile   unsafe.Pointer
	getPTXSize, getPTX, getCUBINSize, getCUBIN unsafe.Pointer
	getLogSize, getLog                         unsafe.Pointer
	path                                       string
	major, minor                               int
	archs                                      []SM
	search                                     libsearch.Result
	mu                                         sync.Mutex
}

// LoadNVRTC finds and dlopens NVRTC (NVRTCOptions.Library, else
// $GOTRAIN_LIBNVRTC, else the candidates opts.Search lists: libnvrtc.so.13,
// .12, .11.2 on the loader path, in CUDA toolkits, conda and NVIDIA's pip
// wheels, the newest CUDA major the driver runs first), resolves its
// symbols and reads its version and supported architectures. The library
// stays loaded for the life of the process. When nothing loads the error
// wraps ErrNVRTCNotAvailable and is a *libsearch.Error naming every
// candidate and why it was not used.
func LoadNVRTC(opts NVRTCOptions) (*NVRTC, error) {
	search := opts.Search
	if search == nil {
		search = libsearch.FromEnv(0)
	}
	var n *NVRTC
	r, ok := search.Load(NVRTCSpec(), opts.Library, "NVRTCOptions.Library", func(c libsearch.Candidate) (string, error) {
		var err error
		n, err = loadNVRTCFile(c.Name)
		if err != nil {
			return "", err
		}
		return n.path, nil
	})
	if !ok {
		return nil, &libsearch.Error{Result: r, Sentinel: ErrNVRTCNotAvailable, Hint: nvrtcInstallHint}
	}
	n.search = r
	return n, nil
}

// Search is how the library was found: every candidate and its outcome.
func (n *NVRTC) Search() libsearch.Result { return n.search }

// loadNVRTCFile opens one candidate and checks it is a usable NVRTC.
func loadNVRTCFile(name string) (*NVRTC, error) {
	preloadBuiltins(name)
	lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
	defer C.free(unsafe.Pointer(lib))
	cname := C.CString(name)
	rc := C.gt_dl_open(lib, &cname, 1, C.RTLD_NOW|C.RTLD_LOCAL)
	C.free(unsafe.Pointer(cname))
	if rc != 0 {
		return nil, fmt.Errorf("%s", C.GoString(&lib.err[0]))
	}
	n := &NVRTC{path: C.GoString(&lib.path[0])}
	lib.err[0] = 0
	var missing []string
	sym := func(name string, required bool) unsafe.Pointer {
		cs := C.CString(name)
		defer C.free(unsafe.Pointer(cs))
		p := C.dlsym(lib.handle, cs)
		if p == nil && required {
			missing = append(missing, name)
		}
		return p
	}
	n.getErrorString = sym("nvrtcGetErrorString", true)
	versionFn := sym("nvrtcVersion", true)
	numArchs := sym("nvrtcGetNumSupportedArchs", true)
	archs := sym("nvrtcGetSupportedArchs", true)
	n.create = sym("nvrtcCreateProgram", true)
	n.destroy = sym("nvrtcDestroyProgram", true)
	n.compile = sym("nvrtcCompileProgram", true)
	n.getPTXSize = sym("nvrtcGetPTXSize", true)
	n.getPTX = sym("nvrtcGetPTX", true)
	n.getLogSize = sym("nvrtcGetProgramLogSize", true)
	n.getLog = sym("nvrtcGetProgramLog", true)
	// CUBIN output appeared in 11.1; without it every build is PTX.
	n.getCUBINSize = sym("nvrtcGetCUBINSize", false)
	n.getCUBIN = sym("nvrtcGetCUBIN", false)
	if n.getCUBIN == nil {
		n.getCUBINSize = nil
	}
	if len(missing) > 0 {
		C.gt_dl_close(lib)
		return nil, fmt.Errorf("%s lacks %s", n.path, strings.Join(missing, ", "))
	}
	var major, minor C.int
	if r := C.gt_nvrtcVersion(versionFn, &major, &minor); r != C.NVRTC_SUCCESS {
		return nil, fmt.Errorf("kernels: nvrtcVersion (%s): %s", n.path, n.errString(r))
	}
	n.major, n.minor = int(major), int(minor)
	var count C.int
	if r := C.gt_nvrtcGetNumSupportedArchs(numArchs, &count); r != C.NVRTC_SUCCESS {
		return nil, fmt.Errorf("kernels: nvrtcGetNumSupportedArchs (%s): %s", n.path, n.errString(r))
	}
	if count > 0 {
		buf := make([]C.int, int(count))
		if r := C.gt_nvrtcGetSupportedArchs(archs, &buf[0]); r != C.NVRTC_SUCCESS {
			return nil, fmt.Errorf("kernels: nvrtcGetSupportedArchs (%s): %s", n.path, n.errString(r))
		}
		for _, a := range buf {
			n.archs = append(n.archs, SM(a))
		}
		slices.Sort(n.archs)
	}
	return n, nil
}

// preloadBuiltins loads the libnvrtc-builtins files beside an NVRTC path
// before NVRTC itself: NVRTC opens its builtins by soname at the first
// compile, which fails when the directory (a pip wheel's, a conda one) is
// not on the loader path, and a loaded copy of that soname is what
// satisfies it. Best effort, kept loaded for the life of the process.
func preloadBuiltins(name string) {
	if !filepath.IsAbs(name) {
		return
	}
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(name), "libnvrtc-builtins.so*"))
	for _, f := range files {
		lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
		cname := C.CString(f)
		C.gt_dl_open(lib, &cname, 1, C.RTLD_NOW|C.RTLD_GLOBAL)
		C.free(unsafe.Pointer(cname))
		C.free(unsafe.Pointer(lib))
	}
}

// errName is NVRTC's name of r, e.g. "NVRTC_ERROR_COMPILATION".
func (n *NVRTC) errName(r C.nvrtcResult) string {
	if s := C.gt_nvrtcGetErrorString(n.getErrorString, r); s != nil {
		return C.GoString(s)
	}
	return "nvrtcResult"
}

func (n *NVRTC) errString(r C.nvrtcResult) string {
	return fmt.Sprintf("%s (%d)", n.errName(r), int(r))
}

// Path is the file NVRTC was loaded from.
func (n *NVRTC) Path() string { return n.path }

// Version is NVRTC's major and minor version (11.8 for Debian's
// libnvrtc11.2 package).
func (n *NVRTC) Version() (major, minor int) { return n.major, n.minor }

// VersionString is Version as "major.minor".
func (n *NVRTC) VersionString() string { return fmt.Sprintf("%d.%d", n.major, n.minor) }

// SupportedArchs are the sm_XY / compute_XY targets this NVRTC knows,
// ascending.
func (n *NVRTC) SupportedArchs() []SM { return slices.Clone(n.archs) }

// Supports reports whether NVRTC can target arch.
func (n *NVRTC) Supports(arch SM) bool { return slices.Contains(n.archs, arch) }

// CanCUBIN reports whether this NVRTC produces CUBIN output at all.
func (n *NVRTC) CanCUBIN() bool { return n.getCUBIN != nil }

// archOption is the --gpu-architecture option for kind and arch.
func archOption(kind Kind, arch SM) string {
	if kind == CUBIN {
		return fmt.Sprintf("--gpu-architecture=sm_%d", int(arch))
	}
	return fmt.Sprintf("--gpu-architecture=compute_%d", int(arch))
}

// Compile compiles CUDA C source src, under the program name name (which
// the log's messages cite), to kind for arch, with extra NVRTC options.
// Sources must not include NVIDIA headers (NVRTC has no include path
// here). A failure is a *CompileError carrying NVRTC's log.
func (n *NVRTC) Compile(src, name string, arch SM, kind Kind, extra ...string) (Image, error) {
	opts := append([]string{archOption(kind, arch)}, extra...)
	fail := func(code C.nvrtcResult, log string) error {
		return &CompileError{Name: name, Kind: kind, Arch: arch, Options: opts, Code: int(code), Msg: n.errName(code), Log: log}
	}
	if kind == CUBIN && !n.CanCUBIN() {
		return Image{}, fmt.Errorf("kernels: compile %s: NVRTC %s at %s has no CUBIN output", name, n.VersionString(), n.path)
	}
	csrc, cname := C.CString(src), C.CString(name)
	defer C.free(unsafe.Pointer(csrc))
	defer C.free(unsafe.Pointer(cname))
	copts := make([]*C.char, len(opts))
	for i, o := range opts {
		copts[i] = C.CString(o)
	}
	defer func() {
		for _, p := range copts {
			C.free(unsafe.Pointer(p))
		}
	}()

	n.mu.Lock()
	defer n.mu.Unlock()
	var prog C.nvrtcProgram
	var sizes C.gt_nvrtc_sizes
	var stage C.int
	ptxSize, cubinSize := n.getPTXSize, n.getCUBINSize
	if kind == PTX {
		cubinSize = nil
	} else {
		ptxSize = nil
	}
	r := C.gt_nvrtc_compile(n.create, n.compile, ptxSize, cubinSize, n.getLogSize, &prog, csrc, cname,
		C.int(len(copts)), &copts[0], &sizes, &stage)
	defer C.gt_nvrtc_destroy(n.destroy, &prog)
	log := ""
	if stage >= 1 && sizes.log > 1 {
		buf := make([]byte, int(sizes.log))
		if C.gt_nvrtc_fetch(n.getLog, prog, (*C.char)(unsafe.Pointer(&buf[0]))) == C.NVRTC_SUCCESS {
			log = strings.TrimRight(string(buf[:len(buf)-1]), "\x00\n")
		}
	}
	if r != C.NVRTC_SUCCESS {
		return Image{}, fail(r, log)
	}
	img := Image{Kind: kind, Arch: arch, Log: log}
	getter, size := n.getPTX, int(sizes.ptx)
	if kind == CUBIN {
		getter, size = n.getCUBIN, int(sizes.cubin)
	}
	if size == 0 {
		return Image{}, fail(C.NVRTC_ERROR_INVALID_OPTION, "NVRTC produced no "+kind.String()+" output")
	}
	buf := make([]byte, size)
	if r := C.gt_nvrtc_fetch(getter, prog, (*C.char)(unsafe.Pointer(&buf[0]))); r != C.NVRTC_SUCCESS {
		return Image{}, fail(r, log)
	}
	if kind == PTX {
		// The PTX size counts its terminating NUL.
		buf = []byte(strings.TrimRight(string(buf), "\x00"))
	}
	img.Data = buf
	return img, nil
}
