package gogemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestVecPackMatchesLoops packs blocks of every transpose, in fp32 and in
// bf16 pairs, once with the AVX-512 helpers and once with the Go loops,
// into buffers pre-filled with the same garbage, and requires the two to
// be bit-identical everywhere (panels, zero padding and the untouched
// tail). Sizes straddle the helpers' units: 12-row and 32-column panels,
// 16-step transpose blocks (32 elements in pairs), odd k, a leading
// dimension wider than the block and unaligned block starts.
func TestVecPackMatchesLoops(t *testing.T) {
	skipWithout(t, hasVecPack(), "AVX-512BW (the packing helpers)")
	rng := rand.New(rand.NewPCG(21, 22))
	dims := []int{1, 5, 12, 13, 16, 24, 31, 32, 33, 47, 64, 65, 100}
	for it := range 300 {
		checkVecPack(t, it%2 == 1, dims[rng.IntN(len(dims))], dims[rng.IntN(len(dims))], rng.IntN(3), rng.IntN(3), rng.IntN(5), rng)
	}
}

// checkVecPack packs op(X)[off:off+rows, pc:pc+kcb] as A and
// op(X)[pc:pc+kcb, off:off+rows] as B, fp32 and bf16, with the helpers and
// with the loops, and requires the same bits everywhere, garbage-filled
// tails included. trans: X is stored transposed (A) / not (B).
func checkVecPack(t *testing.T, trans bool, rows, kcb, off, pc, pad int, rng *rand.Rand) {
	t.Helper()
	const mr, nr = 12, 32
	name := fmt.Sprintf("trans=%v rows=%d kcb=%d off=%d pc=%d pad=%d", trans, rows, kcb, off, pc, pad)
	// The matrix holds op(X)[off:off+rows, pc:pc+kcb] (A) or
	// op(X)[pc:pc+kcb, off:off+rows] (B); stored transposed or not.
	outer, inner := off+rows, pc+kcb
	if trans {
		outer, inner = inner, outer
	}
	ld := inner + pad
	f32 := make([]float32, outer*ld)
	u16 := make([]uint16, outer*ld)
	for i := range f32 {
		f32[i] = rng.Float32() - 0.5
		u16[i] = uint16(rng.Uint32())
	}
	pa := &problem{transA: trans, a: f32, lda: ld}
	pb := &problem{transB: !trans, b: f32, ldb: ld}
	pa16 := &problem{transA: trans, a16: u16, lda: ld}
	pb16 := &problem{transB: !trans, b16: u16, ldb: ld}
	garbage32 := func(n int) ([]float32, []float32) {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(i%7) + 0.5
			y[i] = x[i]
		}
		return x, y
	}
	garbage16 := func(n int) ([]uint16, []uint16) {
		x, y := make([]uint16, n), make([]uint16, n)
		for i := range x {
			x[i] = uint16(i*31 + 7)
			y[i] = x[i]
		}
		return x, y
	}
	same32 := func(what string, x, y []float32) {
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s %s: element %d: helpers %v, loops %v", what, name, i, x[i], y[i])
			}
		}
	}
	same16 := func(what string, x, y []uint16) {
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s %s: element %d: helpers %#x, loops %#x", what, name, i, x[i], y[i])
			}
		}
	}
	extra := 40
	v, s := garbage32(roundUp(rows, mr)*kcb + extra)
	packA(v, pa, off, rows, pc, kcb, mr, true)
	packA(s, pa, off, rows, pc, kcb, mr, false)
	same32("packA", v, s)
	v, s = garbage32(roundUp(rows, nr)*kcb + extra)
	packB(v, pb, pc, kcb, off, rows, nr, true)
	packB(s, pb, pc, kcb, off, rows, nr, false)
	same32("packB", v, s)
	kp := (kcb + 1) / 2
	v16, s16 := garbage16(roundUp(rows, mr)*2*kp + extra)
	packAPairs(v16, pa16, off, rows, pc, kcb, mr, true)
	packAPairs(s16, pa16, off, rows, pc, kcb, mr, false)
	same16("packAPairs", v16, s16)
	v16, s16 = garbage16(roundUp(rows, nr)*2*kp + extra)
	packBPairs(v16, pb16, pc, kcb, off, rows, nr, true)
	packBPairs(s16, pb16, pc, kcb, off, rows, nr, false)
	same16("packBPairs", v16, s16)
}
