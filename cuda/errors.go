package cuda

import (
	"errors"
	"fmt"
)

// ErrNotAvailable is wrapped by Load's error when no usable CUDA driver
// library could be loaded.
var ErrNotAvailable = errors.New("cuda: CUDA driver not available")

// ErrClosed is returned by calls on a Device after Close.
var ErrClosed = errors.New("cuda: device closed")

// Result is a CUresult, the driver's status code.
type Result int

// CUresult values (cuda.h) that callers test for.
const (
	Success             Result = 0
	ErrorInvalidValue   Result = 1
	ErrorOutOfMemory    Result = 2
	ErrorNotInitialized Result = 3
	ErrorNoDevice       Result = 100
	ErrorInvalidDevice  Result = 101
	ErrorInvalidImage   Result = 200
	ErrorInvalidContext Result = 201
	ErrorInvalidPTX     Result = 218
	ErrorUnsupportedPTX Result = 222
	ErrorInvalidHandle  Result = 400
	ErrorNotFound       Result = 500
	ErrorNotReady       Result = 600
	ErrorIllegalAddress Result = 700
	ErrorLaunchOutOfRes Result = 701
	ErrorLaunchFailed   Result = 719
	ErrorNotSupported   Result = 801
	ErrorUnknown        Result = 999
)

// Error is a failed driver call: which call (and on what), the CUresult,
// and the driver's own name and description of it. Log carries the JIT
// compiler's error log when a module fails to load.
type Error struct {
	Op   string // the driver function and its subject, e.g. "cuMemAlloc_v2 (1048576 bytes)"
	Code Result
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"; empty if the driver does not know the code
	Msg  string // e.g. "out of memory"
	Log  string
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUresult"
	}
	s := fmt.Sprintf("cuda: %s: %s (%d)", e.Op, name, int(e.Code))
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// IsResult reports whether err is, or wraps, a driver Error with code r.
func IsResult(err error, r Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == r
}
