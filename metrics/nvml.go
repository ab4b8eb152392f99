//go:build cgo

package metrics

import (
	"fmt"
	"os"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gotrain/gotrain/internal/libsearch"
)

// EnvNVML names the NVML library file to load instead of libnvidia-ml.so.1.
const EnvNVML = "GOTRAIN_LIBNVML"

// NVML is the part of go-nvml's nvml.Interface gotrain uses, so that tests
// run against go-nvml's mock machines. go-nvml binds NVML's symbols only
// when Init succeeds, and any other call before that kills the process
// (an unresolved symbol): QueryNVML calls nothing else unless Init
// returned SUCCESS.
type NVML interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	SystemGetDriverVersion() (string, nvml.Return)
	SystemGetNVMLVersion() (string, nvml.Return)
	SystemGetCudaDriverVersion() (int, nvml.Return)
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return)
}

var _ NVML = nvml.Interface(nil)

// NewNVML returns go-nvml's library for path ("" means $GOTRAIN_LIBNVML,
// else libnvidia-ml.so.1, which the NVIDIA driver installs). Nothing is
// loaded until Init.
func NewNVML(path string) NVML {
	if path == "" {
		path = os.Getenv(EnvNVML)
	}
	if path == "" {
		return nvml.New()
	}
	return nvml.New(nvml.WithLibraryPath(path))
}

// NVMLSpec is NVML for libsearch: the driver installs it, so its soname
// carries no CUDA major.
func NVMLSpec() libsearch.Spec {
	return libsearch.Spec{Name: "NVML", Env: EnvNVML, Sonames: []string{"libnvidia-ml.so.1"}, Unversioned: true}
}

// FindNVML returns the first NVML among s's candidates that initialises
// ($GOTRAIN_LIBNVML alone when set), and the search that found it. The
// returned library is shut down again: QueryNVML initialises it itself.
func FindNVML(s *libsearch.Searcher) (NVML, libsearch.Result, error) {
	var lib NVML
	r, ok := s.Load(NVMLSpec(), "", "", func(c libsearch.Candidate) (string, error) {
		l := nvml.New(nvml.WithLibraryPath(c.Name))
		if ret := l.Init(); ret != nvml.SUCCESS {
			return "", fmt.Errorf("nvmlInit: %v", ret)
		}
		l.Shutdown()
		lib = l
		return "", nil
	})
	if !ok {
		return nil, r, &libsearch.Error{Result: r, Sentinel: errNVMLNotFound,
			Hint: "libnvidia-ml.so.1 comes with the NVIDIA driver; set " + EnvNVML + " to its path"}
	}
	return lib, r, nil
}

var errNVMLNotFound = fmt.Errorf("metrics: NVML init: %v", nvml.ERROR_LIBRARY_NOT_FOUND)

// QueryDefaultNVML is QueryNVML of the library at path, or of the one
// FindNVML finds when path is "".
func QueryDefaultNVML(path string) (NVMLReport, error) {
	if path != "" {
		return QueryNVML(NewNVML(path))
	}
	lib, _, err := FindNVML(libsearch.FromEnv(0))
	if err != nil {
		return NVMLReport{}, err
	}
	return QueryNVML(lib)
}

// QueryNVML initialises NVML, reads the driver's versions and every GPU's
// identity, memory and utilization, and shuts NVML down again. A failed
// Init (no driver: ERROR_LIBRARY_NOT_FOUND) is the returned error; a
// failure on one GPU is recorded in its GPUInfo.Err.
func QueryNVML(lib NVML) (NVMLReport, error) {
	var rep NVMLReport
	if ret := lib.Init(); ret != nvml.SUCCESS {
		hint := ""
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			hint = " (libnvidia-ml.so.1 comes with the NVIDIA driver)"
		}
		return rep, fmt.Errorf("metrics: NVML init: %v%s", ret, hint)
	}
	defer lib.Shutdown()
	var ret nvml.Return
	if rep.DriverVersion, ret = lib.SystemGetDriverVersion(); ret != nvml.SUCCESS {
		return rep, fmt.Errorf("metrics: NVML driver version: %v", ret)
	}
	if rep.NVMLVersion, ret = lib.SystemGetNVMLVersion(); ret != nvml.SUCCESS {
		return rep, fmt.Errorf("metrics: NVML version: %v", ret)
	}
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS {
		rep.CUDADriverVersion = v
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return rep, fmt.Errorf("metrics: NVML device count: %v", ret)
	}
	for i := 0; i < n; i++ {
		rep.GPUs = append(rep.GPUs, queryGPU(lib, i))
	}
	return rep, nil
}

func queryGPU(lib NVML, i int) GPUInfo {
	g := GPUInfo{Index: i, Utilization: -1}
	var errs []string
	fail := func(what string, ret nvml.Return) { errs = append(errs, fmt.Sprintf("%s: %v", what, ret)) }
	dev, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		g.Err = fmt.Sprintf("handle: %v", ret)
		return g
	}
	if g.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		fail("name", ret)
	}
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		fail("uuid", ret)
	}
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		g.PCIBusID = cString(pci.BusId[:])
	} else {
		fail("pci info", ret)
	}
	if g.CCMajor, g.CCMinor, ret = dev.GetCudaComputeCapability(); ret != nvml.SUCCESS {
		fail("compute capability", ret)
	}
	if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemoryTotalBytes, g.MemoryUsedBytes = mem.Total, mem.Used
	} else {
		fail("memory", ret)
	}
	// Utilization is unsupported on some parts (and in MIG mode); that is
	// not an error worth reporting.
	if u, ret := dev.GetUtilizationRates(); ret == nvml.SUCCESS {
		g.Utilization = float64(u.Gpu) / 100
	} else if ret != nvml.ERROR_NOT_SUPPORTED {
		fail("utilization", ret)
	}
	g.Err = strings.Join(errs, "; ")
	return g
}

// cString reads a NUL-terminated C char array.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
