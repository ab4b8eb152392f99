package blas

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Environment variables Load reads.
const (
	// EnvLibrary names the OpenBLAS file to load (a path or a soname). When
	// set it is the only name tried.
	EnvLibrary = "GOTRAIN_OPENBLAS"
	// EnvCoreType is OpenBLAS's own core-type override, read once by the
	// library when it is loaded.
	EnvCoreType = "OPENBLAS_CORETYPE"
	// EnvNumThreads sizes OpenBLAS's thread pool when it is loaded; Load
	// sets it to 1.
	EnvNumThreads = "OPENBLAS_NUM_THREADS"
	// EnvBLAS chooses the GEMM Default returns: "go", "openblas" or
	// "auto" (unset: auto). It reaches every rank `gotrain launch` starts.
	EnvBLAS = "GOTRAIN_BLAS"
)

// Names Select accepts.
const (
	ChoiceAuto     = "auto"
	ChoiceGo       = "go"
	ChoiceOpenBLAS = "openblas"
)

// PreferGo says what auto picks where OpenBLAS loads. The Go GEMM reaches a
// median 93% of OpenBLAS (SkylakeX kernels) on the model's shapes, not its
// speed, so OpenBLAS stays auto's choice where it loads, run single-threaded
// under the backend's own goroutine split; the Go GEMM is the choice where
// it does not (never gonum), and --blas go or GOTRAIN_BLAS=go picks it
// everywhere. Flip this once the Go GEMM matches OpenBLAS on every shape.
const PreferGo = false

// ErrNotAvailable is wrapped by Load's error when no usable OpenBLAS could
// be loaded.
var ErrNotAvailable = errors.New("blas: OpenBLAS not available")

// installHint says how to get the library on the distributions CI and the
// project's machines use.
const installHint = "install it (Debian/Ubuntu: apt-get install libopenblas0-pthread; Fedora: dnf install openblas-threads) or set " + EnvLibrary + " to its path"

// LoadOptions configures Load. The zero value is usable.
type LoadOptions struct {
	// Threads is how many goroutines a large product is split over, each
	// calling OpenBLAS single-threaded; 0 means runtime.GOMAXPROCS(0).
	Threads int
	// Library, if set, is the only file tried, ahead of $GOTRAIN_OPENBLAS.
	Library string
}

// defaultLibraryNames are the sonames OpenBLAS is installed under, most
// common first: Debian and Ubuntu register their pthread, OpenMP and serial
// builds as libopenblas.so.0 through alternatives; Fedora ships the pthread
// and OpenMP builds as libopenblasp and libopenblaso; libopenblas.so is the
// development link of source builds and conda.
func defaultLibraryNames(goos string) []string {
	if goos == "darwin" {
		return []string{"libopenblas.0.dylib", "libopenblas.dylib"}
	}
	return []string{"libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0", "libopenblaso.so.0"}
}

// libraryNames returns the names Load tries, in order, and where they came
// from (for error messages).
func libraryNames(opts LoadOptions) (names []string, source string) {
	if opts.Library != "" {
		return []string{opts.Library}, "LoadOptions.Library"
	}
	if p := os.Getenv(EnvLibrary); p != "" {
		// An explicit override that fails must not quietly load another copy.
		return []string{p}, "$" + EnvLibrary
	}
	return defaultLibraryNames(runtime.GOOS), ""
}

// notAvailable builds the descriptive error for a library that did not load.
func notAvailable(names []string, source, detail string) error {
	from := ""
	if source != "" {
		from = " (from " + source + ")"
	}
	return fmt.Errorf("%w: tried %s%s: %s; %s", ErrNotAvailable, strings.Join(names, ", "), from, detail, installHint)
}

// Default is Select($GOTRAIN_BLAS, threads), with an unusable choice
// replaced by the Go GEMM and Info().Note saying why: a run never stops
// for want of a native library.
func Default(threads int) (Impl, Info) {
	impl, err := Select(os.Getenv(EnvBLAS), threads)
	if err != nil {
		impl = fallbackGo{Go: NewGo(threads), note: err.Error()}
	}
	return impl, impl.Info()
}

// Select returns the GEMM named by choice, splitting large products over
// threads goroutines (0: GOMAXPROCS):
//   - "go": the Go GEMM;
//   - "openblas": OpenBLAS, single-threaded per call and split by us, or an
//     error wrapping ErrNotAvailable;
//   - "auto" or "": the Go GEMM if PreferGo, else OpenBLAS where it loads
//     and the Go GEMM where it does not (Info().Note says why).
func Select(choice string, threads int) (Impl, error) {
	switch strings.ToLower(strings.TrimSpace(choice)) {
	case ChoiceGo:
		return NewGo(threads), nil
	case ChoiceOpenBLAS:
		return Load(LoadOptions{Threads: threads})
	case "", ChoiceAuto:
		if PreferGo {
			return NewGo(threads), nil
		}
		impl, err := Load(LoadOptions{Threads: threads})
		if err != nil {
			return fallbackGo{Go: NewGo(threads), note: err.Error()}, nil
		}
		return withNativeBF16(impl, threads), nil
	}
	return nil, fmt.Errorf("blas: unknown GEMM %q (from --blas or $%s): want %s, %s or %s", choice, EnvBLAS, ChoiceAuto, ChoiceGo, ChoiceOpenBLAS)
}
