//go:build !cgo

package metrics

import "errors"

// EnvNVML names the NVML library file to load instead of libnvidia-ml.so.1.
const EnvNVML = "GOTRAIN_LIBNVML"

// QueryDefaultNVML reports that NVML cannot be queried: go-nvml needs cgo,
// and this binary was built with CGO_ENABLED=0.
func QueryDefaultNVML(path string) (NVMLReport, error) {
	return NVMLReport{}, errors.New("metrics: NVML needs a cgo build; this binary was built with CGO_ENABLED=0")
}
