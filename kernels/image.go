package kernels

import (
	"fmt"
	"strings"
)

// SM is a compute capability as major*10+minor: 80 is sm_80 (A100), 90 is
// sm_90 (H100).
type SM int

func (s SM) String() string { return fmt.Sprintf("sm_%d", int(s)) }

// Kind is what a compilation produces.
type Kind int

const (
	// CUBIN is device code for exactly one sm_XY, loaded as is.
	CUBIN Kind = iota
	// PTX is virtual-ISA text for compute_XY, compiled by the driver's JIT
	// for the device at load, on any device of that capability or newer.
	PTX
)

func (k Kind) String() string {
	if k == CUBIN {
		return "CUBIN"
	}
	return "PTX"
}

// ext is the cache file extension of an image kind.
func (k Kind) ext() string {
	if k == CUBIN {
		return ".cubin"
	}
	return ".ptx"
}

// Image is one compiled program.
type Image struct {
	Kind Kind
	// Arch is the target: sm_Arch for CUBIN, compute_Arch for PTX.
	Arch SM
	Data []byte
	// Log is NVRTC's compile log (warnings); empty for a cached image.
	Log string
	// Cached says the image came from the on-disk cache.
	Cached bool
	// CacheErr is why a fresh image could not be stored in the cache (the
	// image itself is good).
	CacheErr error
}

// validImage is a cheap check that data looks like an image of kind k: an
// ELF file for CUBIN, PTX text with its .version and .target directives.
func validImage(k Kind, data []byte) bool {
	if k == CUBIN {
		return len(data) > 64 && string(data[:4]) == "\x7fELF"
	}
	s := string(data)
	return strings.Contains(s, ".version") && strings.Contains(s, ".target")
}

// CompileError is a failed NVRTC compilation, with NVRTC's log.
type CompileError struct {
	Name    string // program name, as in the log's file references
	Kind    Kind
	Arch    SM
	Options []string
	Code    int    // nvrtcResult
	Msg     string // nvrtcGetErrorString
	Log     string
}

func (e *CompileError) Error() string {
	s := fmt.Sprintf("kernels: compile %s to %s for %s (%s): %s (%d)", e.Name, e.Kind, e.Arch,
		strings.Join(e.Options, " "), e.Msg, e.Code)
	if e.Log != "" {
		s += "\n" + strings.TrimRight(e.Log, "\n")
	}
	return s
}
