package cuda

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#cgo linux LDFLAGS: -ldl
#include <stdlib.h>
#include "gt_dl.h"
#include "gt_cuda.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// EnvLibrary names the libcuda file to load (a path or a soname); when set
// it is the only name tried.
const EnvLibrary = "GOTRAIN_LIBCUDA"

// defaultLibraryNames: the driver has had one soname for its whole life.
var defaultLibraryNames = []string{"libcuda.so.1"}

const installHint = "libcuda.so.1 comes with the NVIDIA driver (not the CUDA toolkit): install the driver, " +
	"run containers with --gpus (NVIDIA Container Toolkit), or set " + EnvLibrary + " to the file"

// Options configures Load. The zero value is usable.
type Options struct {
	// Library, if set, is the only file tried, ahead of $GOTRAIN_LIBCUDA.
	Library string
}

// symbols are the driver's entry points, in the library's memory.
type symbols struct {
	init, driverGetVersion, getErrorString, getErrorName                     unsafe.Pointer
	deviceGetCount, deviceGet, deviceGetName, deviceGetPCIBusID              unsafe.Pointer
	deviceGetAttribute, deviceTotalMem                                       unsafe.Pointer
	primaryCtxRetain, primaryCtxRelease, ctxSetCurrent, ctxGetCurrent        unsafe.Pointer
	ctxSynchronize, memGetInfo, memAlloc, memFree, memAllocHost, memFreeHost unsafe.Pointer
	memcpyHtoD, memcpyDtoH, memcpyDtoD                                       unsafe.Pointer
	memcpyHtoDAsync, memcpyDtoHAsync, memcpyDtoDAsync                        unsafe.Pointer
	memsetD8, memsetD32, memsetD8Async                                       unsafe.Pointer
	streamCreate, streamDestroy, streamSynchronize, streamWaitEvent          unsafe.Pointer
	streamQuery                                                              unsafe.Pointer
	eventCreate, eventRecord, eventSynchronize, eventDestroy                 unsafe.Pointer
	eventElapsedTime                                                         unsafe.Pointer
	moduleLoadDataEx, moduleGetFunction, moduleUnload                        unsafe.Pointer
	funcSetAttribute, launchKernel                                           unsafe.Pointer
}

// symbolTable lists every symbol with where it goes. Versioned names are
// spelled out: the unversioned ones are the 32-bit legacy API.
func (s *symbols) table() []struct {
	name string
	dst  *unsafe.Pointer
} {
	return []struct {
		name string
		dst  *unsafe.Pointer
	}{
		{"cuInit", &s.init}, {"cuDriverGetVersion", &s.driverGetVersion},
		{"cuGetErrorString", &s.getErrorString}, {"cuGetErrorName", &s.getErrorName},
		{"cuDeviceGetCount", &s.deviceGetCount}, {"cuDeviceGet", &s.deviceGet},
		{"cuDeviceGetName", &s.deviceGetName}, {"cuDeviceGetPCIBusId", &s.deviceGetPCIBusID},
		{"cuDeviceGetAttribute", &s.deviceGetAttribute}, {"cuDeviceTotalMem_v2", &s.deviceTotalMem},
		{"cuDevicePrimaryCtxRetain", &s.primaryCtxRetain}, {"cuDevicePrimaryCtxRelease_v2", &s.primaryCtxRelease},
		{"cuCtxSetCurrent", &s.ctxSetCurrent}, {"cuCtxGetCurrent", &s.ctxGetCurrent},
		{"cuCtxSynchronize", &s.ctxSynchronize}, {"cuMemGetInfo_v2", &s.memGetInfo},
		{"cuMemAlloc_v2", &s.memAlloc}, {"cuMemFree_v2", &s.memFree},
		{"cuMemAllocHost_v2", &s.memAllocHost}, {"cuMemFreeHost", &s.memFreeHost},
		{"cuMemcpyHtoD_v2", &s.memcpyHtoD}, {"cuMemcpyDtoH_v2", &s.memcpyDtoH}, {"cuMemcpyDtoD_v2", &s.memcpyDtoD},
		{"cuMemcpyHtoDAsync_v2", &s.memcpyHtoDAsync}, {"cuMemcpyDtoHAsync_v2", &s.memcpyDtoHAsync},
		{"cuMemcpyDtoDAsync_v2", &s.memcpyDtoDAsync},
		{"cuMemsetD8_v2", &s.memsetD8}, {"cuMemsetD32_v2", &s.memsetD32}, {"cuMemsetD8Async", &s.memsetD8Async},
		{"cuStreamCreate", &s.streamCreate}, {"cuStreamDestroy_v2", &s.streamDestroy},
		{"cuStreamSynchronize", &s.streamSynchronize}, {"cuStreamWaitEvent", &s.streamWaitEvent},
		{"cuStreamQuery", &s.streamQuery},
		{"cuEventCreate", &s.eventCreate}, {"cuEventRecord", &s.eventRecord},
		{"cuEventSynchronize", &s.eventSynchronize}, {"cuEventDestroy_v2", &s.eventDestroy},
		{"cuModuleLoadDataEx", &s.moduleLoadDataEx}, {"cuModuleGetFunction", &s.moduleGetFunction},
		{"cuModuleUnload", &s.moduleUnload}, {"cuFuncSetAttribute", &s.funcSetAttribute},
		{"cuLaunchKernel", &s.launchKernel},
	}
}

// Driver is a loaded and initialised CUDA driver. It is immutable and safe
// for concurrent use; the library stays loaded for the life of the process
// (the driver must never be unloaded while contexts exist).
type Driver struct {
	sym     symbols
	path    string
	version int
}

// Load dlopens the CUDA driver (Options.Library, else $GOTRAIN_LIBCUDA,
// else libcuda.so.1), resolves every symbol gotrain uses and calls cuInit.
//
// A library that is missing or lacks a symbol gives an error wrapping
// ErrNotAvailable that names every file tried and what to install. A
// driver that loads but finds no GPU (cuInit's CUDA_ERROR_NO_DEVICE) is
// not an error: DeviceCount is then 0. Any other cuInit failure is an
// *Error that also gives the driver's version.
func Load(opts Options) (*Driver, error) {
	names, source := []string{opts.Library}, "Options.Library"
	if opts.Library == "" {
		names, source = defaultLibraryNames, ""
		if p := os.Getenv(EnvLibrary); p != "" {
			// An explicit override that fails must not quietly load another copy.
			names, source = []string{p}, "$"+EnvLibrary
		}
	}
	lib, err := openLibrary(names)
	if err != nil {
		return nil, notAvailable(names, source, err.Error())
	}
	d := &Driver{path: C.GoString(&lib.path[0])}
	var missing []string
	for _, e := range d.sym.table() {
		cs := C.CString(e.name)
		*e.dst = C.gt_dl_sym(lib, cs)
		C.free(unsafe.Pointer(cs))
		if *e.dst == nil {
			missing = append(missing, e.name)
		}
	}
	missing = append(missing, d.sym.resolveAlternates(lib)...)
	C.free(unsafe.Pointer(lib))
	if len(missing) > 0 {
		return nil, notAvailable(names, source, d.missingDetail(missing))
	}

	var v C.int
	if r := C.gt_cuDriverGetVersion(d.sym.driverGetVersion, &v); r != C.CUDA_SUCCESS {
		return nil, d.err(r, "cuDriverGetVersion")
	}
	d.version = int(v)
	if r := C.gt_cuInit(d.sym.init, 0); r != C.CUDA_SUCCESS && Result(r) != ErrorNoDevice {
		return nil, d.err(r, "cuInit (driver %s, %s)", d.VersionString(), d.path)
	}
	return d, nil
}

// openLibrary dlopens the first of names that loads; the returned struct is
// C memory the caller frees.
func openLibrary(names []string) (*C.gt_dl_lib, error) {
	lib := (*C.gt_dl_lib)(C.calloc(1, C.size_t(unsafe.Sizeof(C.gt_dl_lib{}))))
	cnames := make([]*C.char, len(names))
	for i, n := range names {
		cnames[i] = C.CString(n)
	}
	// The C array of C strings: a Go slice of C pointers is fine to pass.
	rc := C.gt_dl_open(lib, &cnames[0], C.int(len(cnames)), C.RTLD_NOW|C.RTLD_LOCAL)
	for _, p := range cnames {
		C.free(unsafe.Pointer(p))
	}
	if rc != 0 {
		msg := C.GoString(&lib.err[0])
		C.free(unsafe.Pointer(lib))
		return nil, fmt.Errorf("%s", msg)
	}
	lib.err[0] = 0
	return lib, nil
}

// lookup resolves an optional symbol without recording its absence.
func lookup(lib *C.gt_dl_lib, name string) unsafe.Pointer {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.dlsym(lib.handle, cs)
}

func notAvailable(names []string, source, detail string) error {
	from := ""
	if source != "" {
		from = " (from " + source + ")"
	}
	return fmt.Errorf("%w: tried %s%s: %s; %s", ErrNotAvailable, strings.Join(names, ", "), from, detail, installHint)
}

// err converts a failed CUresult into an *Error, with the driver's name and
// description of the code.
func (d *Driver) err(r C.CUresult, op string, args ...any) error {
	if len(args) > 0 {
		op = fmt.Sprintf(op, args...)
	}
	e := &Error{Op: op, Code: Result(r)}
	if s := C.gt_cuGetErrorName(d.sym.getErrorName, r); s != nil {
		e.Name = C.GoString(s)
	}
	if s := C.gt_cuGetErrorString(d.sym.getErrorString, r); s != nil {
		e.Msg = C.GoString(s)
	}
	return e
}

// Path is the file the driver was loaded from.
func (d *Driver) Path() string { return d.path }

// Version is cuDriverGetVersion's number: the newest CUDA version the
// driver supports, as 1000*major + 10*minor (12020 for 12.2).
func (d *Driver) Version() int { return d.version }

// VersionString is Version as "major.minor".
func (d *Driver) VersionString() string {
	return fmt.Sprintf("%d.%d", d.version/1000, d.version%1000/10)
}

// DeviceCount is the number of devices the driver sees (0 when cuInit
// found none).
func (d *Driver) DeviceCount() (int, error) {
	var n C.int
	r := C.gt_cuDeviceGetCount(d.sym.deviceGetCount, &n)
	if Result(r) == ErrorNotInitialized || Result(r) == ErrorNoDevice {
		// cuInit reported no device; the driver then refuses to count.
		return 0, nil
	}
	if r != C.CUDA_SUCCESS {
		return 0, d.err(r, "cuDeviceGetCount")
	}
	return int(n), nil
}

// device resolves an ordinal to a CUdevice.
func (d *Driver) device(ordinal int) (C.CUdevice, error) {
	var dev C.CUdevice
	if r := C.gt_cuDeviceGet(d.sym.deviceGet, &dev, C.int(ordinal)); r != C.CUDA_SUCCESS {
		return 0, d.err(r, "cuDeviceGet (%d)", ordinal)
	}
	return dev, nil
}

// DeviceInfo queries one device's name, PCI bus id, compute capability,
// multiprocessor count and memory.
func (d *Driver) DeviceInfo(ordinal int) (DeviceInfo, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Ordinal: ordinal}
	var buf [256]C.char
	if r := C.gt_cuDeviceGetName(d.sym.deviceGetName, &buf[0], C.int(len(buf)), dev); r != C.CUDA_SUCCESS {
		return info, d.err(r, "cuDeviceGetName (device %d)", ordinal)
	}
	info.Name = C.GoString(&buf[0])
	if r := C.gt_cuDeviceGetPCIBusId(d.sym.deviceGetPCIBusID, &buf[0], C.int(len(buf)), dev); r != C.CUDA_SUCCESS {
		return info, d.err(r, "cuDeviceGetPCIBusId (device %d)", ordinal)
	}
	info.PCIBusID = C.GoString(&buf[0])
	attrs := []struct {
		attr C.CUdevice_attribute
		name string
		dst  *int
	}{
		{C.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR", &info.Major},
		{C.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR", &info.Minor},
		{C.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT", &info.Multiprocessors},
		{C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", &info.MaxSharedPerBlockOptin},
	}
	for _, a := range attrs {
		var v C.int
		if r := C.gt_cuDeviceGetAttribute(d.sym.deviceGetAttribute, &v, a.attr, dev); r != C.CUDA_SUCCESS {
			return info, d.err(r, "cuDeviceGetAttribute (%s, device %d)", a.name, ordinal)
		}
		*a.dst = int(v)
	}
	var total C.size_t
	if r := C.gt_cuDeviceTotalMem(d.sym.deviceTotalMem, &total, dev); r != C.CUDA_SUCCESS {
		return info, d.err(r, "cuDeviceTotalMem_v2 (device %d)", ordinal)
	}
	info.TotalMemoryBytes = uint64(total)
	return info, nil
}

// Devices describes every device the driver sees.
func (d *Driver) Devices() ([]DeviceInfo, error) {
	n, err := d.DeviceCount()
	if err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, 0, n)
	for i := 0; i < n; i++ {
		info, err := d.DeviceInfo(i)
		if err != nil {
			return out, err
		}
		out = append(out, info)
	}
	return out, nil
}
