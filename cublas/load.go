package cublas

import (
	"fmt"
	"os"
	"strings"
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
}

// defaultNames are the sonames tried, newest CUDA major first; cuBLAS and
// cuBLASLt of one CUDA release share the major.
func defaultNames() []string {
	return []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}
}

func defaultLtNames() []string {
	return []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"}
}

const installHint = "install cuBLAS (libcublas12 from the CUDA repository or the nvidia/cuda runtime image)"

// libraryNames returns the names to try, in order, and where they came from
// (for error messages).
func libraryNames(opts LoadOptions, env string, defaults []string) (names []string, source string) {
	if opts.Library != "" {
		return []string{opts.Library}, "LoadOptions.Library"
	}
	if p := os.Getenv(env); p != "" {
		return []string{p}, "$" + env
	}
	return defaults, ""
}

// notAvailable builds the error for a library that did not load.
func notAvailable(what string, names []string, source, env, detail string) error {
	from := ""
	if source != "" {
		from = " (from " + source + ")"
	}
	return fmt.Errorf("%w: %s: tried %s%s: %s; %s, or set %s to its path",
		ErrNotAvailable, what, strings.Join(names, ", "), from, detail, installHint, env)
}
