package backendtest

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// castInputs are fp32 values that probe rounding to 16 bits: specials,
// subnormals, exact ties of both formats, the overflow edges, and random
// bit patterns of every class.
func castInputs(h *harness) []float32 {
	v := []float32{
		0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc01234),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1.5 * 0x1p-133, 0x1p-126,
		0x1.fep127, 0x1.ffp127, // largest bf16, and its tie with 2^128
		65504, 65519, 65520, -65520, 0x1p-24, 0x1p-25, 0x1.8p-24, 0x1p-14, 0x1.ff8p-15,
		1, 1 + 0x1p-8, 1 + 0x1p-7 + 0x1p-8, 1 + 0x1p-11, 1 + 0x1p-10 + 0x1p-11,
	}
	for i := 0; i < 20000; i++ {
		// Exact bf16 ties: the dropped half is exactly 0x8000.
		v = append(v, math.Float32frombits(h.rng.Uint32()&0xffff0000|0x8000))
		// Exact f16 ties: the midpoint of two adjacent finite halves.
		b := uint16(h.rng.IntN(0x7bff))
		mid := (float64(RefDecodeF16(b)) + float64(RefDecodeF16(b+1))) / 2
		if h.rng.IntN(2) == 0 {
			mid = -mid
		}
		v = append(v, float32(mid))
		v = append(v, math.Float32frombits(h.rng.Uint32()))
		v = append(v, float32(h.rng.NormFloat64()*math.Pow(2, float64(h.rng.IntN(60)-40))))
	}
	return v
}

// sameFloat is bit-for-bit equality except that any NaN matches a NaN of the
// same sign.
func sameFloat(a, b float32) bool {
	if a != a || b != b {
		return a != a && b != b && math.Signbit(float64(a)) == math.Signbit(float64(b))
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func testCasts(t *testing.T, nb func(*testing.T) backend.Backend) {
	h := newHarness(t, nb, 5000)
	in := castInputs(h)

	// The package's scalar conversions, which every backend and WriteF32 use.
	for _, x := range in {
		if g, w := backend.F32FromBF16(backend.BF16FromF32(x)), RefBF16(x); !sameFloat(g, w) {
			t.Fatalf("BF16FromF32(%g [%#08x]) = %g, want %g", x, math.Float32bits(x), g, w)
		}
		if g, w := backend.F32FromF16(backend.F16FromF32(x)), RefF16(x); !sameFloat(g, w) {
			t.Fatalf("F16FromF32(%g [%#08x]) = %g, want %g", x, math.Float32bits(x), g, w)
		}
	}
	for i := 0; i < 1<<16; i++ {
		if g, w := backend.F32FromBF16(uint16(i)), RefDecodeBF16(uint16(i)); !sameFloat(g, w) {
			t.Fatalf("F32FromBF16(%#04x) = %g, want %g", i, g, w)
		}
		if g, w := backend.F32FromF16(uint16(i)), RefDecodeF16(uint16(i)); !sameFloat(g, w) {
			t.Fatalf("F32FromF16(%#04x) = %g, want %g", i, g, w)
		}
	}

	// The backend's Copy from fp32 to each 16-bit format.
	raw := make([]byte, 4*len(in))
	for i, x := range in {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	f32 := h.alloc(backend.F32, len(in))
	if err := h.be.Upload(f32, raw); err != nil {
		t.Fatal(err)
	}
	for _, dt := range []backend.DType{backend.BF16, backend.F16} {
		half := h.alloc(dt, len(in))
		h.be.Copy(half, f32)
		got := halves(t, h, half)
		for i, x := range in {
			if g, w := decode(dt, got[i]), roundTo(dt, x); !sameFloat(g, w) {
				t.Fatalf("Copy fp32→%s of %g [%#08x] = %g [%#04x], want %g", dt, x, math.Float32bits(x), g, got[i], w)
			}
		}
	}

	// Every 16-bit pattern widened to fp32 and cast across the 16-bit formats.
	all := make([]byte, 2<<16)
	for i := 0; i < 1<<16; i++ {
		binary.LittleEndian.PutUint16(all[2*i:], uint16(i))
	}
	for _, from := range []backend.DType{backend.BF16, backend.F16} {
		src := h.alloc(from, 1<<16)
		if err := h.be.Upload(src, all); err != nil {
			t.Fatal(err)
		}
		wide := h.alloc(backend.F32, 1<<16)
		h.be.Copy(wide, src)
		got := h.get(wide)
		for i := range got {
			if w := decode(from, uint16(i)); !sameFloat(float32(got[i]), w) {
				t.Fatalf("Copy %s→fp32 of %#04x = %g, want %g", from, i, got[i], w)
			}
		}
		to := backend.F16
		if from == backend.F16 {
			to = backend.BF16
		}
		dst := h.alloc(to, 1<<16)
		h.be.Copy(dst, src)
		gotH := halves(t, h, dst)
		for i := range gotH {
			if g, w := decode(to, gotH[i]), roundTo(to, decode(from, uint16(i))); !sameFloat(g, w) {
				t.Fatalf("Copy %s→%s of %#04x = %#04x (%g), want %g", from, to, i, gotH[i], g, w)
			}
		}
	}
}

// halves downloads a 16-bit buffer's raw words.
func halves(t *testing.T, h *harness, b backend.Buffer) []uint16 {
	t.Helper()
	raw := make([]byte, b.Bytes())
	if err := h.be.Download(raw, b); err != nil {
		t.Fatal(err)
	}
	out := make([]uint16, b.Len())
	for i := range out {
		out[i] = binary.LittleEndian.Uint16(raw[2*i:])
	}
	return out
}

// decode is the reference value of 16-bit bits in dt.
func decode(dt backend.DType, bits uint16) float32 {
	if dt == backend.BF16 {
		return RefDecodeBF16(bits)
	}
	return RefDecodeF16(bits)
}
