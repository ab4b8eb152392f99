package tcp

import (
	"fmt"
	"unsafe"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// Reductions work on byte views of staging memory and receive buffers,
// which are 8-byte aligned with element offsets, in the host's byte order:
// the wire format is little-endian, as on every platform gotrain targets
// (amd64, arm64).

// wireType is the element type a reduction of dt runs in.
func wireType(dt backend.DType) backend.DType {
	switch dt {
	case backend.BF16, backend.F16:
		return backend.F32
	}
	return dt
}

func is16BitFloat(dt backend.DType) bool { return dt == backend.BF16 || dt == backend.F16 }

// checkReduction rejects an op a dtype cannot take; every rank gets the same
// answer for the same arguments, so no rank is left waiting.
func checkReduction(kind comm.Kind, dt backend.DType, op comm.Op) error {
	switch op {
	case comm.Sum, comm.Max:
	case comm.Avg:
		if !dt.IsFloat() {
			return fmt.Errorf("comm: %s: avg of %s is not defined; use sum", kind, dt)
		}
	default:
		return fmt.Errorf("comm: %s: unknown op %s", kind, op)
	}
	switch dt {
	case backend.F32, backend.BF16, backend.F16, backend.I32, backend.U16:
		return nil
	}
	return fmt.Errorf("comm: %s: cannot reduce dtype %s", kind, dt)
}

func asF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func asI32(b []byte) []int32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func asU16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func f32AsBytes(f []float32) []byte {
	if len(f) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), 4*len(f))
}

// reduceInto sets dst = dst ⊕ src element-wise in wire type wt (Avg reduces
// as Sum; the 1/N comes once at the end). Integer sums wrap.
func reduceInto(dst, src []byte, wt backend.DType, op comm.Op) {
	switch wt {
	case backend.F32:
		// max of float32 propagates NaN whichever side it is on.
		reduceSlices(asF32(dst), asF32(src), op)
	case backend.I32:
		reduceSlices(asI32(dst), asI32(src), op)
	case backend.U16:
		reduceSlices(asU16(dst), asU16(src), op)
	default:
		panic("tcp: reduce in unsupported wire type")
	}
}

// reduceSlices sets d = max(d, s) for Max and d += s otherwise.
func reduceSlices[T float32 | int32 | uint16](d, s []T, op comm.Op) {
	s = s[:len(d)]
	if op == comm.Max {
		for i := range d {
			d[i] = max(d[i], s[i])
		}
		return
	}
	for i := range d {
		d[i] += s[i]
	}
}

// scale multiplies fp32 values by s (Avg's 1/N).
func scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}

// widen converts 16-bit floats of dt to fp32 (exact).
func widen(dst []float32, src []byte, dt backend.DType) {
	h := asU16(src)[:len(dst)]
	if dt == backend.BF16 {
		for i, v := range h {
			dst[i] = backend.F32FromBF16(v)
		}
		return
	}
	for i, v := range h {
		dst[i] = backend.F32FromF16(v)
	}
}

// narrow rounds fp32 values to 16-bit floats of dt, to nearest even.
func narrow(dst []byte, src []float32, dt backend.DType) {
	h := asU16(dst)[:len(src)]
	if dt == backend.BF16 {
		for i, v := range src {
			h[i] = backend.BF16FromF32(v)
		}
		return
	}
	for i, v := range src {
		h[i] = backend.F16FromF32(v)
	}
}
