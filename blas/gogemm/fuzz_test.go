package gogemm

import (
	"math/rand/v2"
	"testing"
)

// FuzzSgemm checks the Go GEMM, both kernels and one or two goroutines,
// against the float64 reference on fuzzer-chosen shapes (up to 80 on each
// side, so every edge-tile case and a KC boundary are reachable),
// transposes, padding, slice offsets and alpha/beta.
func FuzzSgemm(f *testing.F) {
	f.Add(uint8(13), uint8(33), uint8(70), uint8(0), uint8(1), uint8(2), int8(4), int8(0), uint64(1))
	f.Add(uint8(1), uint8(1), uint8(1), uint8(3), uint8(0), uint8(0), int8(-3), int8(2), uint64(2))
	f.Add(uint8(64), uint8(64), uint8(64), uint8(1), uint8(3), uint8(1), int8(1), int8(-1), uint64(3))
	f.Fuzz(func(t *testing.T, m, n, k, flags, pad, off uint8, alpha, beta int8, seed uint64) {
		tc := gemmCase{
			ta: flags&1 != 0, tb: flags&2 != 0,
			m: 1 + int(m)%80, n: 1 + int(n)%80, k: 1 + int(k)%300,
			pad: int(pad) % 5, off: int(off) % 7,
			alpha: float32(alpha) / 4, beta: float32(beta) / 4,
		}
		g := New(1 + int(flags>>2)%2)
		if flags&8 != 0 {
			g = NewGeneric(1 + int(flags>>2)%2)
		}
		check(t, g, tc, rand.New(rand.NewPCG(seed, 7)))
	})
}

// FuzzBgemm is FuzzSgemm for the bf16 GEMM: the CPU's pair kernel, the
// portable pair kernel or widening into the fp32 kernels, on one or two
// goroutines, against the float64 product of the widened operands.
func FuzzBgemm(f *testing.F) {
	f.Add(uint8(13), uint8(33), uint8(71), uint8(0), uint8(1), uint8(2), int8(4), int8(0), uint64(1))
	f.Add(uint8(1), uint8(1), uint8(1), uint8(3), uint8(0), uint8(0), int8(-3), int8(2), uint64(2))
	f.Add(uint8(64), uint8(64), uint8(255), uint8(17), uint8(3), uint8(1), int8(1), int8(-1), uint64(3))
	f.Fuzz(func(t *testing.T, m, n, k, flags, pad, off uint8, alpha, beta int8, seed uint64) {
		tc := gemmCase{
			ta: flags&1 != 0, tb: flags&2 != 0,
			m: 1 + int(m)%80, n: 1 + int(n)%80, k: 1 + int(k)%300,
			pad: int(pad) % 5, off: int(off) % 7,
			alpha: float32(alpha) / 4, beta: float32(beta) / 4,
		}
		threads := 1 + int(flags>>2)%2
		g := New(threads)
		switch (flags >> 3) % 3 {
		case 1:
			g.bkern = genericBF16Kernel()
		case 2:
			g.bkern = nil
		}
		checkB(t, g, tc, rand.New(rand.NewPCG(seed, 7)))
	})
}

// FuzzVecPack holds the AVX-512 packing helpers to the Go loops, bit for
// bit, on fuzzer-chosen blocks: every transpose, fp32 and bf16 pairs,
// sizes across the 12-row and 32-column panels and the 16-step transpose
// blocks, odd k, offsets and padding.
func FuzzVecPack(f *testing.F) {
	f.Add(uint8(13), uint8(33), uint8(1), uint8(2), uint8(3), false, uint64(1))
	f.Add(uint8(32), uint8(64), uint8(0), uint8(0), uint8(0), true, uint64(2))
	f.Add(uint8(100), uint8(17), uint8(2), uint8(1), uint8(4), true, uint64(3))
	f.Fuzz(func(t *testing.T, rows, kcb, off, pc, pad uint8, trans bool, seed uint64) {
		skipWithout(t, hasVecPack(), "AVX-512BW (the packing helpers)")
		checkVecPack(t, trans, 1+int(rows)%130, 1+int(kcb)%130, int(off)%5, int(pc)%5, int(pad)%6, rand.New(rand.NewPCG(seed, 9)))
	})
}

// FuzzBgemmRound holds BgemmRound to Bgemm over the bias rows then rounded
// to bf16, bit for bit, on fuzzer-chosen shapes (k up to one slab),
// transposes, padding, alpha and with or without a bias.
func FuzzBgemmRound(f *testing.F) {
	f.Add(uint8(13), uint8(33), uint16(71), uint8(0), uint8(1), int8(4), uint64(1))
	f.Add(uint8(1), uint8(1), uint16(1), uint8(7), uint8(0), int8(-3), uint64(2))
	f.Add(uint8(64), uint8(70), uint16(511), uint8(5), uint8(3), int8(1), uint64(3))
	f.Fuzz(func(t *testing.T, m, n uint8, k uint16, flags, pad uint8, alpha int8, seed uint64) {
		tc := gemmCase{ta: flags&1 != 0, tb: flags&2 != 0, m: 1 + int(m)%80, n: 1 + int(n)%80, k: 1 + int(k)%512,
			pad: int(pad) % 5, alpha: float32(alpha) / 4}
		checkRound(t, New(1+int(flags>>3)%2), tc, flags&4 != 0, rand.New(rand.NewPCG(seed, 11)))
	})
}
