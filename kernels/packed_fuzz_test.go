package kernels_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

// view is a tensor of n elements of dt at element offset off into guarded
// memory: guard bytes of a fixed pattern surround it, so a store that
// strays outside [0, n) (a whole-pack store over a partial pack) shows.
type view struct {
	mem     *emu.Mem
	dt      kernels.DType
	off, n  int
	pattern byte
}

const viewGuard = 32 // bytes on each side, two packs' worth of fp32

func newView(dt kernels.DType, off, n int, pattern byte) *view {
	v := &view{mem: emu.Alloc(viewGuard + (off+n)*dt.Size() + viewGuard), dt: dt, off: off, n: n, pattern: pattern}
	b := v.mem.Bytes()
	for i := range b {
		b[i] = pattern
	}
	return v
}

// ptr is the view's first element as a kernel argument. emu.Alloc memory
// is 16-byte aligned, so off decides the view's alignment.
func (v *view) ptr() uint64 {
	return uint64(uintptr(unsafe.Pointer(&v.mem.Bytes()[viewGuard+v.off*v.dt.Size()])))
}

func (v *view) raw(i int) []byte {
	s := v.dt.Size()
	return v.mem.Bytes()[viewGuard+(v.off+i)*s : viewGuard+(v.off+i+1)*s]
}

// set stores x (rounded to the view's dtype) as element i and returns the
// value stored.
func (v *view) set(i int, x float32) float32 {
	switch v.dt {
	case kernels.BF16:
		binary.LittleEndian.PutUint16(v.raw(i), backend.BF16FromF32(x))
	case kernels.F16:
		binary.LittleEndian.PutUint16(v.raw(i), backend.F16FromF32(x))
	default:
		binary.LittleEndian.PutUint32(v.raw(i), math.Float32bits(x))
	}
	return v.get(i)
}

func (v *view) get(i int) float32 {
	switch v.dt {
	case kernels.BF16:
		return backend.F32FromBF16(binary.LittleEndian.Uint16(v.raw(i)))
	case kernels.F16:
		return backend.F32FromF16(binary.LittleEndian.Uint16(v.raw(i)))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(v.raw(i)))
}

// round is x as the view's dtype stores it.
func (v *view) round(x float32) float32 {
	switch v.dt {
	case kernels.BF16:
		return backend.F32FromBF16(backend.BF16FromF32(x))
	case kernels.F16:
		return backend.F32FromF16(backend.F16FromF32(x))
	}
	return x
}

// guardsIntact reports whether every byte outside the view still holds
// its pattern.
func (v *view) guardsIntact() bool {
	b := v.mem.Bytes()
	lo, hi := viewGuard+v.off*v.dt.Size(), viewGuard+(v.off+v.n)*v.dt.Size()
	for i, x := range b {
		if (i < lo || i >= hi) && x != v.pattern {
			return false
		}
	}
	return true
}

// FuzzPackedViews drives the pack helpers' choice between a 16-byte access
// and element access through gt_add and gt_cast on views of any length,
// element offset (so any alignment, and a different one per tensor) and
// dtype mix, on a small grid that makes threads loop: every element must
// be the fp32 sum (or the value) rounded once to the output's dtype, and
// no byte outside the output view may change.
func FuzzPackedViews(f *testing.F) {
	lib := emu.ForTest(f)
	f.Add(uint16(37), uint8(1), uint8(0), uint8(3), uint8(1), uint8(0), uint8(2), uint64(1))
	f.Add(uint16(8), uint8(0), uint8(0), uint8(0), uint8(1), uint8(1), uint8(1), uint64(2))
	f.Add(uint16(45), uint8(0), uint8(0), uint8(4), uint8(0), uint8(1), uint8(0), uint64(4))
	f.Add(uint16(1000), uint8(4), uint8(2), uint8(6), uint8(2), uint8(0), uint8(1), uint64(3))
	dts := []kernels.DType{kernels.F32, kernels.BF16, kernels.F16}
	f.Fuzz(func(t *testing.T, n16 uint16, offOut, offA, offB, dtOut, dtA, dtB uint8, seed uint64) {
		n := int(n16 % 1200)
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		out := newView(dts[dtOut%3], int(offOut%8), n, 0xa5)
		a := newView(dts[dtA%3], int(offA%8), n, 0x5a)
		b := newView(dts[dtB%3], int(offB%8), n, 0x3c)
		defer out.mem.Free()
		defer a.mem.Free()
		defer b.mem.Free()
		av, bv := make([]float32, n), make([]float32, n)
		for i := 0; i < n; i++ {
			av[i] = a.set(i, float32(r.NormFloat64()*100))
			bv[i] = b.set(i, float32(r.NormFloat64()))
		}
		grid, block := emu.Dim{X: 1 + uint32(seed%3)}, emu.Dim{X: 32 * (1 + uint32(seed/3%2))}
		check := func(kernel string, want func(i int) float32) {
			t.Helper()
			for i := 0; i < n; i++ {
				if got, w := out.get(i), out.round(want(i)); math.Float32bits(got) != math.Float32bits(w) {
					t.Fatalf("%s n=%d offsets %d,%d,%d dtypes %d,%d,%d: [%d] = %g, want %g", kernel, n, out.off, a.off,
						b.off, out.dt, a.dt, b.dt, i, got, w)
				}
			}
			if !out.guardsIntact() || !a.guardsIntact() || !b.guardsIntact() {
				t.Fatalf("%s n=%d offsets %d,%d,%d dtypes %d,%d,%d: a byte outside a view changed", kernel, n,
					out.off, a.off, b.off, out.dt, a.dt, b.dt)
			}
		}
		if err := lib.Launch("gt_add", grid, block, out.ptr(), int32(out.dt), a.ptr(), int32(a.dt), b.ptr(), int32(b.dt),
			int64(n)); err != nil {
			t.Fatal(err)
		}
		check("gt_add", func(i int) float32 { return av[i] + bv[i] })
		if err := lib.Launch("gt_cast", grid, block, out.ptr(), int32(out.dt), a.ptr(), int32(a.dt), int64(n)); err != nil {
			t.Fatal(err)
		}
		check("gt_cast", func(i int) float32 { return av[i] })
	})
}
