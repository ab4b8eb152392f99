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
	"os"
	"slices"
	"strings"
	"sync"
	"unsafe"
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
	mu                                         sync.Mutex
}

// LoadNVRTC dlopens NVRTC (NVRTCOptions.Library, else $GOTRAIN_LIBNVRTC,
// else libnvrtc.so.13, .12, .11.2), resolves its symbols and reads its
// version and supported architectures. The library stays loaded for the
// life of the process. A missing library gives an error wrapping
// ErrNVRTCNotAvailable that names every file tried and what to install.
func LoadNVRTC(opts NVRTCOptions) (*NVRTC, error) {
	names, source := nvrtcNames, ""
	if opts.Library != "" {
		names, source = []string{opts.Library}, "NVRTCOptions.Library"
	} else if p := os.Getenv(EnvNVRTC); p != "" {
		names, source = []string{p}, "$"+EnvNVRTC
	}
	lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
	defer C.free(unsafe.Pointer(lib))
	cnames := make([]*C.char, len(names))
	for i, n := range names {
		cnames[i] = C.CString(n)
	}
	rc := C.gt_dl_open(lib, &cnames[0], C.int(len(cnames)), C.RTLD_NOW|C.RTLD_LOCAL)
	for _, p := range cnames {
		C.free(unsafe.Pointer(p))
	}
	if rc != 0 {
		return nil, nvrtcNotAvailable(names, source, C.GoString(&lib.err[0]))
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
		return nil, nvrtcNotAvailable(names, source, fmt.Sprintf("%s lacks %s", n.path, strings.Join(missing, ", ")))
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

func nvrtcNotAvailable(names []string, source, detail string) error {
	from := ""
	if source != "" {
		from = " (from " + source + ")"
	}
	return fmt.Errorf("%w: tried %s%s: %s; %s", ErrNVRTCNotAvailable, strings.Join(names, ", "), from, detail, nvrtcInstallHint)
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
