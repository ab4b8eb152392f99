package nccl

import (
	"fmt"
	"os"
	"strings"
)

// EnvLibrary names the NCCL file to load (a path or a soname). When set it
// is the only name tried: an override that fails must not quietly load
// another copy.
const EnvLibrary = "GOTRAIN_LIBNCCL"

// LoadOptions configures Load. The zero value is usable.
type LoadOptions struct {
	// Library, if set, is the only file tried, ahead of $GOTRAIN_LIBNCCL.
	Library string
}

// defaultNames: NCCL 2.x has always been libnccl.so.2.
func defaultNames() []string { return []string{"libnccl.so.2"} }

const installHint = "install NCCL (libnccl2 from the CUDA repository, or the nvidia/cuda runtime image) or set " +
	EnvLibrary + " to its path"

// libraryNames returns the names Load tries, in order, and where they came
// from (for error messages).
func libraryNames(opts LoadOptions) (names []string, source string) {
	if opts.Library != "" {
		return []string{opts.Library}, "LoadOptions.Library"
	}
	if p := os.Getenv(EnvLibrary); p != "" {
		return []string{p}, "$" + EnvLibrary
	}
	return defaultNames(), ""
}

func notAvailable(names []string, source, detail string) error {
	from := ""
	if source != "" {
		from = " (from " + source + ")"
	}
	return fmt.Errorf("%w: tried %s%s: %s; %s", ErrNotAvailable, strings.Join(names, ", "), from, detail, installHint)
}
