package cpu

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// Upload implements backend.Backend: src fills the first len(src) bytes of
// dst.
func (be *Backend) Upload(dst backend.Buffer, src []byte) error {
	if dst.IsNil() {
		return fmt.Errorf("cpu upload: zero Buffer")
	}
	if len(src) > dst.Bytes() {
		return fmt.Errorf("cpu upload to %s: %d bytes for %d", dst, len(src), dst.Bytes())
	}
	if dst.Mem().Freed {
		return fmt.Errorf("cpu upload to %s: buffer was freed", dst)
	}
	copy(hostBytes("Upload", dst), src)
	return nil
}

// Download implements backend.Backend: src's bytes fill the start of dst.
func (be *Backend) Download(dst []byte, src backend.Buffer) error {
	if src.IsNil() {
		return fmt.Errorf("cpu download: zero Buffer")
	}
	if len(dst) < src.Bytes() {
		return fmt.Errorf("cpu download from %s: %d bytes of room for %d", src, len(dst), src.Bytes())
	}
	if src.Mem().Freed {
		return fmt.Errorf("cpu download from %s: buffer was freed", src)
	}
	copy(dst, hostBytes("Download", src))
	return nil
}

// Copy implements backend.Backend. Equal dtypes copy bytes (overlap is
// allowed); different float dtypes convert through fp32 with one
// round-to-nearest-even, which is exact for every widening.
func (be *Backend) Copy(dst, src backend.Buffer) {
	const op = "Copy"
	checkLen(op, "dst", dst, src.Len())
	if dst.DType() == src.DType() {
		copy(hostBytes(op, dst), hostBytes(op, src))
		return
	}
	if !dst.DType().IsFloat() || !src.DType().IsFloat() {
		panic("cpu: Copy: cannot cast " + src.DType().String() + " to " + dst.DType().String())
	}
	dv, sv := floatView(op, dst), floatView(op, src)
	be.parallel(dst.Len(), 1<<15, func(_, lo, hi int) {
		dtmp, stmp := dv.tmp(pieceLen), sv.tmp(pieceLen)
		for s := lo; s < hi; s += pieceLen {
			n := min(pieceLen, hi-s)
			o := dv.out(s, n, dtmp)
			copy(o, sv.vload(s, n, stmp))
			dv.vstore(s, o)
		}
	})
}

// Zero implements backend.Backend.
func (be *Backend) Zero(dst backend.Buffer) {
	raw := hostBytes("Zero", dst)
	be.parallel(len(raw), 1<<18, func(_, lo, hi int) { clear(raw[lo:hi]) })
}
