package cublas

import (
	"fmt"
	"os"
	"strings"

	"github.com/gotrain/gotrain/internal/libsearch"
)

// Environment variables naming the file to load. When one is set it is the
// only name tried: an override that fails must not quietly load another
// copy.
const (
	EnvLibrary   = "GOTRAIN_LIBCUBLAS"
	EnvLtLibrary = "GOTRAIN_LIBCUBLASLT"
)

// LoadOptions configures Load and LoadLt. The zero value is usable.
type LoadOptions struct {
	// Library, if set, is the only file tried, ahead of the environment.
	Library string
	// Search finds the library where no override names one; nil searches
	// as libsearch.FromEnv(0) does (no driver version to check against).
	Search *libsearch.Searcher
}

// Spec is cuBLAS for libsearch: its sonames and NVIDIA's wheel directory.
func Spec() libsearch.Spec {
	return libsearch.Spec{Name: "cuBLAS", Env: EnvLibrary, Sonames: defaultNames(), Wheels: []string{"cublas/lib"}}
}

// LtSpec is cuBLASLt for libsearch; it ships beside cuBLAS.
func LtSpec() libsearch.Spec {
	return libsearch.Spec{Name: "cuBLASLt", Env: EnvLtLibrary, Sonames: defaultLtNames(), Wheels: []string{"cublas/lib"}}
}

func (o LoadOptions) searcher() *libsearch.Searcher {
	if o.Search != nil {
		return o.Search
	}
	return libsearch.FromEnv(0)
}

// defaultNames are the sonames tried, newest CUDA major first; cuBLAS and
// cuBLASLt of one CUDA release share the major.
func defaultNames() []string {
	return []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
}

func defaultLtNames() []string {
	return []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"}
}

const installHint = "install cuBLAS (libcublas12 from the CUDA repository or the nvidia/cuda runtime image; " +
	"in a Python environment PyTorch's wheels or pip's nvidia-cublas-cu12 are found when it is active ($VIRTUAL_ENV) or its python3 is on PATH)"

// notAvailable builds the error for a library that did not load: every
// candidate with the reason it was not used.
func notAvailable(r libsearch.Result, env string) error {
	return &libsearch.Error{Result: r, Sentinel: fmt.Errorf("%w: %s", ErrNotAvailable, r.Library),
		Hint: installHint + ", or set " + env + " to its path"}
}

// ltBeside is the cuBLASLt file of the same release beside a loaded
// cuBLAS (libcublasLt.so.<major> in its directory), or "" when there is
// none: a cuBLASLt from another release could disagree with cuBLAS on the
// layout of shared descriptors.
func ltBeside(cublasPath string, major int) string {
	if !strings.HasPrefix(cublasPath, "/") {
		return ""
	}
	p := cublasPath[:strings.LastIndexByte(cublasPath, '/')+1] + fmt.Sprintf("libcublasLt.so.%d", major)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}
