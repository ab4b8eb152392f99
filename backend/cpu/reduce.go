package cpu

import (
	"math"

	"github.com/gotrain/gotrain/backend"
)

// SumSquares implements backend.Backend. Each chunk sums in float64 and the
// chunk sums are added in chunk order, so the result is deterministic for a
// given Threads.
func (be *Backend) SumSquares(x backend.Buffer) float64 {
	xv := floatView("SumSquares", x)
	n := x.Len()
	parts := make([]float64, be.chunks(n, elemGrain))
	be.parallel(n, elemGrain, func(w, lo, hi int) {
		tmp := xv.tmp(pieceLen)
		var s0, s1, s2, s3 float64
		for p := lo; p < hi; p += pieceLen {
			v := xv.vload(p, min(pieceLen, hi-p), tmp)
			for ; len(v) >= 4; v = v[4:] {
				a, b, c, d := float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3])
				s0 += a * a
				s1 += b * b
				s2 += c * c
				s3 += d * d
			}
			for _, x := range v {
				a := float64(x)
				s0 += a * a
			}
		}
		parts[w] = (s0 + s1) + (s2 + s3)
	})
	var sum float64
	for _, s := range parts {
		sum += s
	}
	return sum
}

// NonFinite implements backend.Backend by testing exponent bits (all ones is
// Inf or NaN in every float format), so no conversion is needed.
func (be *Backend) NonFinite(x backend.Buffer) bool {
	const op = "NonFinite"
	n := x.Len()
	found := make([]bool, be.chunks(n, elemGrain))
	switch x.DType() {
	case backend.F32:
		xs := f32s(op, x)
		be.parallel(n, elemGrain, func(w, lo, hi int) {
			for _, f := range xs[lo:hi] {
				if math.Float32bits(f)&0x7f800000 == 0x7f800000 {
					found[w] = true
					return
				}
			}
		})
	case backend.BF16, backend.F16:
		mask := uint16(0x7f80)
		if x.DType() == backend.F16 {
			mask = 0x7c00
		}
		hs := u16s(op, x)
		be.parallel(n, elemGrain, func(w, lo, hi int) {
			for _, h := range hs[lo:hi] {
				if h&mask == mask {
					found[w] = true
					return
				}
			}
		})
	default:
		panic("cpu: NonFinite: want a float buffer, got " + x.DType().String())
	}
	for _, f := range found {
		if f {
			return true
		}
	}
	return false
}
