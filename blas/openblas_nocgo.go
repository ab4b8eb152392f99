//go:build !cgo

package blas

import "fmt"

// Load reports that OpenBLAS cannot be loaded: this binary was built with
// CGO_ENABLED=0, and dlopen needs cgo.
func Load(opts LoadOptions) (Impl, error) {
	return nil, fmt.Errorf("%w: this binary was built with CGO_ENABLED=0; rebuild with cgo (and gcc) to load OpenBLAS at run time", ErrNotAvailable)
}
