package nccl

import (
	"errors"
	"fmt"
)

var (
	// ErrNotAvailable is wrapped by Load's error when NCCL could not be
	// loaded.
	ErrNotAvailable = errors.New("nccl: NCCL not available")
	// ErrClosed is returned by calls on a Comm after Destroy or Abort.
	ErrClosed = errors.New("nccl: communicator closed")
	// ErrInvalidArgument is wrapped by errors for arguments refused before
	// calling NCCL; the message says which.
	ErrInvalidArgument = errors.New("nccl: invalid argument")
	// ErrUnsupported is wrapped by errors for a call, type or op the loaded
	// NCCL is too old for; the message names the release needed.
	ErrUnsupported = errors.New("nccl: not supported by this NCCL")
)

// Result is an ncclResult_t.
type Result int

// ncclResult_t values.
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6 // 2.13.4
	InProgress         Result = 7 // 2.14.3
	Timeout            Result = 8 // 2.30.3
)

// String is the result's C name, e.g. "ncclInvalidArgument".
func (r Result) String() string {
	names := [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
		"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress", "ncclTimeout"}
	if r >= 0 && int(r) < len(names) {
		return names[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int(r))
}

// Error is a failed NCCL call: the call and its subject, the result, NCCL's
// text for the result (ncclGetErrorString) and its last error message
// (ncclGetLastError, 2.13.4 and later; empty before).
type Error struct {
	Op     string // e.g. "ncclAllReduce (37 float32, sum, rank 1 of 4)"
	Result Result
	Msg    string
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s: %s (%d)", e.Op, e.Result, int(e.Result))
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// IsResult reports whether err is, or wraps, an Error with result r.
func IsResult(err error, r Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Result == r
}
