package cublas

import (
	"errors"
	"fmt"
)

// ErrNotAvailable is wrapped by Load's and LoadLt's error when the library
// could not be loaded.
var ErrNotAvailable = errors.New("cublas: not available")

// ErrClosed is returned by calls on a handle after Close.
var ErrClosed = errors.New("cublas: handle closed")

// ErrInvalidArgument is wrapped by errors for arguments rejected before
// calling the library (they would be CUBLAS_STATUS_INVALID_VALUE or
// CUBLAS_STATUS_NOT_SUPPORTED there); the message says which.
var ErrInvalidArgument = errors.New("cublas: invalid argument")

// ErrNoPlan is wrapped by LtHandle.Matmul's error when the library would
// not plan the product (a descriptor, layout or preference it refused, or
// no algorithm from the heuristic) rather than failed to run it: the
// caller may compute the product another way. The wrapped *Error says
// which step and status.
var ErrNoPlan = errors.New("cublas: cuBLASLt cannot plan this product")

// Status is a cublasStatus_t.
type Status int

// cublasStatus_t values.
const (
	StatusSuccess         Status = 0
	StatusNotInitialized  Status = 1
	StatusAllocFailed     Status = 3
	StatusInvalidValue    Status = 7
	StatusArchMismatch    Status = 8
	StatusMappingError    Status = 11
	StatusExecutionFailed Status = 13
	StatusInternalError   Status = 14
	StatusNotSupported    Status = 15
	StatusLicenseError    Status = 16
)

// String is the status's C name, e.g. "CUBLAS_STATUS_INVALID_VALUE".
func (s Status) String() string {
	switch s {
	case StatusSuccess:
		return "CUBLAS_STATUS_SUCCESS"
	case StatusNotInitialized:
		return "CUBLAS_STATUS_NOT_INITIALIZED"
	case StatusAllocFailed:
		return "CUBLAS_STATUS_ALLOC_FAILED"
	case StatusInvalidValue:
		return "CUBLAS_STATUS_INVALID_VALUE"
	case StatusArchMismatch:
		return "CUBLAS_STATUS_ARCH_MISMATCH"
	case StatusMappingError:
		return "CUBLAS_STATUS_MAPPING_ERROR"
	case StatusExecutionFailed:
		return "CUBLAS_STATUS_EXECUTION_FAILED"
	case StatusInternalError:
		return "CUBLAS_STATUS_INTERNAL_ERROR"
	case StatusNotSupported:
		return "CUBLAS_STATUS_NOT_SUPPORTED"
	case StatusLicenseError:
		return "CUBLAS_STATUS_LICENSE_ERROR"
	}
	return fmt.Sprintf("cublasStatus(%d)", int(s))
}

// Error is a failed cuBLAS or cuBLASLt call: the call and its subject, the
// status, and the library's own text for it (cublasGetStatusString; empty
// when the library predates that call).
type Error struct {
	Op     string // e.g. "cublasGemmEx (m=64 n=32 k=16)"
	Status Status
	Msg    string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("cublas: %s: %s (%d)", e.Op, e.Status, int(e.Status))
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// IsStatus reports whether err is, or wraps, an Error with status s.
func IsStatus(err error, s Status) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == s
}
