package cublas

import (
	"errors"
	"fmt"
)

// driverFloor is the oldest driver branch each cuBLAS major runs on: the
// library carries the CUDA runtime of its release, which needs a driver
// for that CUDA major (cuBLAS 13 needs R580 even where a CUDA 12 library
// runs).
var driverFloor = map[int]string{11: "R450", 12: "R525", 13: "R580"}

// withDriverHint adds to a failed handle creation what it can mean: cuBLAS
// and cuBLASLt answer CUBLAS_STATUS_NOT_INITIALIZED both when no GPU is
// usable and when the driver is older than their CUDA major.
func withDriverHint(err error, v Version) error {
	var e *Error
	if !errors.As(err, &e) || e.Status != StatusNotInitialized {
		return err
	}
	floor, ok := driverFloor[v.Major]
	if !ok {
		return err
	}
	return fmt.Errorf("%w (no usable GPU, or a driver older than %s: cuBLAS %v needs a driver for CUDA %d)",
		err, floor, v, v.Major)
}
