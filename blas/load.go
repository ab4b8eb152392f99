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
)

// ErrNotAvailable is wrapped by Load's error when no usable OpenBLAS could
// be loaded.
var ErrNotAvailable = errors.New("blas: OpenBLAS not available")

// installHint says how to get the library on the distributions CI and the
// project's machines use.
const installHint = "install it (Debian/Ubuntu: apt-get install libopenblas0-pthread; Fedora: dnf install openblas-threads) or set " + EnvLibrary + " to its path"

// LoadOptions configures Load. The zero value is usable.
type LoadOptions struct {
	// Threads is OpenBLAS's thread count; 0 means runtime.GOMAXPROCS(0).
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

// Default returns OpenBLAS with the given thread count (0: GOMAXPROCS) if it
// loads and passes its self-check, and otherwise Gonum. Info says which, and
// Note why when it is Gonum.
func Default(threads int) (Impl, Info) {
	impl, err := Load(LoadOptions{Threads: threads})
	if err != nil {
		impl = fallback{note: err.Error()}
	}
	return impl, impl.Info()
}
