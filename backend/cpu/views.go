package cpu

import (
	"unsafe"

	"github.com/gotrain/gotrain/backend"
)

// hostBytes is the memory under b. It panics on the zero Buffer, a freed
// buffer or one that does not live in host memory (another backend's).
func hostBytes(op string, b backend.Buffer) []byte {
	mem := b.Mem()
	if mem == nil {
		panic("cpu: " + op + ": zero Buffer")
	}
	if mem.Freed {
		panic("cpu: " + op + ": use of a freed buffer")
	}
	if mem.Host == nil && mem.Bytes > 0 {
		panic("cpu: " + op + ": buffer is not in host memory")
	}
	off := b.ByteOff()
	return mem.Host[off : off+b.Bytes() : off+b.Bytes()]
}

// f32s views an F32 buffer as a slice of exactly b.Len() elements.
func f32s(op string, b backend.Buffer) []float32 {
	if b.DType() != backend.F32 {
		panic("cpu: " + op + ": want an fp32 buffer, got " + b.DType().String())
	}
	raw := hostBytes(op, b)
	if len(raw) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&raw[0])), b.Len())
}

// u16s views a BF16, F16 or U16 buffer as raw 16-bit words.
func u16s(op string, b backend.Buffer) []uint16 {
	if b.DType().Size() != 2 {
		panic("cpu: " + op + ": want a 16-bit buffer, got " + b.DType().String())
	}
	raw := hostBytes(op, b)
	if len(raw) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&raw[0])), b.Len())
}

// i32s views an I32 buffer.
func i32s(op string, b backend.Buffer) []int32 {
	if b.DType() != backend.I32 {
		panic("cpu: " + op + ": want an int32 buffer, got " + b.DType().String())
	}
	raw := hostBytes(op, b)
	if len(raw) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&raw[0])), b.Len())
}

// fview reads and writes a floating-point buffer of any float dtype in fp32
// pieces. For F32 the pieces are views of the buffer itself (no copy, and
// store is a no-op); for BF16/F16 they are widened into, or narrowed from,
// caller-provided scratch. Ops are written once against fview and cost
// nothing extra in fp32.
type fview struct {
	dt  backend.DType
	f32 []float32
	u16 []uint16
}

func floatView(op string, b backend.Buffer) fview {
	switch b.DType() {
	case backend.F32:
		return fview{dt: backend.F32, f32: f32s(op, b)}
	case backend.BF16, backend.F16:
		return fview{dt: b.DType(), u16: u16s(op, b)}
	}
	panic("cpu: " + op + ": want a float buffer, got " + b.DType().String())
}

// isF32 says whether pieces are direct views.
func (v fview) isF32() bool { return v.dt == backend.F32 }

// tmp returns scratch able to hold an n-element piece of v, or nil when v is
// F32 and needs none.
func (v fview) tmp(n int) []float32 {
	if v.isF32() {
		return nil
	}
	return make([]float32, n)
}

// load returns elements [off, off+n) in fp32: a view for F32, else widened
// into tmp[:n].
func (v fview) load(off, n int, tmp []float32) []float32 {
	if v.isF32() {
		return v.f32[off : off+n : off+n]
	}
	src := v.u16[off : off+n]
	dst := tmp[:n:n]
	if v.dt == backend.BF16 {
		for i, h := range src {
			dst[i] = backend.F32FromBF16(h)
		}
	} else {
		for i, h := range src {
			dst[i] = backend.F32FromF16(h)
		}
	}
	return dst
}

// out returns where to write fp32 results for elements [off, off+n): a view
// for F32, else tmp[:n]. Pass the result to store.
func (v fview) out(off, n int, tmp []float32) []float32 {
	if v.isF32() {
		return v.f32[off : off+n : off+n]
	}
	return tmp[:n:n]
}

// store rounds s to nearest-even into elements [off, off+len(s)) unless v is
// F32, where s already is that memory.
func (v fview) store(off int, s []float32) {
	if v.isF32() {
		return
	}
	dst := v.u16[off : off+len(s)]
	if v.dt == backend.BF16 {
		for i, x := range s {
			dst[i] = backend.BF16FromF32(x)
		}
	} else {
		for i, x := range s {
			dst[i] = backend.F16FromF32(x)
		}
	}
}

// pieceLen is how many elements an elementwise op converts at a time on its
// 16-bit path: small enough to stay in L1 with a few operands.
const pieceLen = 2048

// widen returns all of v in fp32 for ops that need whole matrices (GEMMs): v
// itself when F32, else a scratch copy that must be handed back with
// release. The conversion is parallel.
func (be *Backend) widen(v fview, n int) []float32 {
	if v.isF32() {
		return v.f32[:n:n]
	}
	s := be.scratch.get(n)
	be.parallel(n, 1<<15, func(_, lo, hi int) { v.vload(lo, hi-lo, s[lo:hi]) })
	return s
}

// scratchFor returns memory to compute a whole output of v in: v itself when
// F32, else scratch to be narrowed with narrow.
func (be *Backend) scratchFor(v fview, n int) []float32 {
	if v.isF32() {
		return v.f32[:n:n]
	}
	return be.scratch.get(n)
}

// narrow stores s (from scratchFor or widen) into v and releases it.
func (be *Backend) narrow(v fview, s []float32) {
	if v.isF32() {
		return
	}
	be.parallel(len(s), 1<<15, func(_, lo, hi int) { v.vstore(lo, s[lo:hi]) })
	be.scratch.put(s)
}

// release hands back scratch from widen without storing it.
func (be *Backend) release(v fview, s []float32) {
	if !v.isF32() {
		be.scratch.put(s)
	}
}

// checkLen panics unless b has exactly n elements.
func checkLen(op, name string, b backend.Buffer, n int) {
	if b.Len() != n {
		panic("cpu: " + op + ": " + name + " has the wrong length")
	}
}
