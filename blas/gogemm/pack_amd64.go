//go:build amd64

package gogemm

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The packing loops move 32-bit units (a float32, or a pair of bf16 along
// k) into the kernels' panels. In Go they ran one element at a time, with
// the 48- and 128-byte runs going through memmove: about a fifth of a
// training step's GEMM time, and a third of a bf16 GEMM's, whose kernel is
// twice as fast. These AVX-512 helpers (pack_amd64.s) move 16 or 32 units
// an instruction; the wrappers check every bound first.

//go:noescape
func transpose16(dst unsafe.Pointer, ldd int, src unsafe.Pointer, lds int, rows, blocks int)

//go:noescape
func interleave16(dst unsafe.Pointer, dstStep int, src0, src1 unsafe.Pointer, srcStep, panels int, lmask, smaskLo, smaskHi, pf int)

//go:noescape
func roundTile(dst unsafe.Pointer, ldd int, src, bias unsafe.Pointer, alpha float32, rows, maskLo, maskHi int)

//go:noescape
func copy32(dst unsafe.Pointer, dstStep int, src unsafe.Pointer, srcStep, panels int, maskLo, maskHi, pf int)

// hasVecPack reports whether the packing helpers run here: AVX-512F for
// the 32-bit moves and AVX-512BW for the 16-bit ones.
func hasVecPack() bool { return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW }

// lowBits is a mask of the n ≤ 32 lowest bits.
func lowBits(n int) int { return int(uint32(1)<<n - 1) }

// tposeF32 sets dst[s·ldd + r] = src[r·lds + s] for r < rows (12 or 16)
// and s < 16·blocks.
func tposeF32(dst []float32, ldd int, src []float32, lds, rows, blocks int) {
	if blocks <= 0 {
		return
	}
	steps := 16 * blocks
	_ = dst[(steps-1)*ldd+rows-1]
	_ = src[(rows-1)*lds+steps-1]
	transpose16(unsafe.Pointer(&dst[0]), 4*ldd, unsafe.Pointer(&src[0]), 4*lds, rows, blocks)
}

// tposePairs is tposeF32 on bf16 pairs: dst[2(s·ldd + r) + t] =
// src[r·lds + 2s + t] for t < 2, r < rows (12 or 16) and s < 16·blocks.
func tposePairs(dst []uint16, ldd int, src []uint16, lds, rows, blocks int) {
	if blocks <= 0 {
		return
	}
	steps := 16 * blocks
	_ = dst[2*((steps-1)*ldd+rows-1)+1]
	_ = src[(rows-1)*lds+2*steps-1]
	transpose16(unsafe.Pointer(&dst[0]), 4*ldd, unsafe.Pointer(&src[0]), 2*lds, rows, blocks)
}

// interleaveRows sets, for each panel q < panels and j < w ≤ 32,
// dst[q·dstStep + 2j] = r0[q·w + j] and dst[q·dstStep + 2j + 1] = r1[q·w + j],
// prefetching the words pf elements past those it reads (no access: a
// prefetch never faults).
func interleaveRows(dst []uint16, dstStep int, r0, r1 []uint16, w, panels, pf int) {
	if panels <= 0 {
		return
	}
	_ = dst[(panels-1)*dstStep+2*w-1]
	_ = r0[panels*w-1]
	_ = r1[panels*w-1]
	interleave16(unsafe.Pointer(&dst[0]), 2*dstStep, unsafe.Pointer(&r0[0]), unsafe.Pointer(&r1[0]), 2*w, panels,
		lowBits(w), lowBits(min(2*w, 32)), lowBits(max(2*w-32, 0)), 2*pf)
}

// copyRuns sets dst[q·dstStep + j] = src[q·w + j] for q < panels and
// j < w ≤ 32, prefetching as interleaveRows does.
func copyRuns(dst []float32, dstStep int, src []float32, w, panels, pf int) {
	if panels <= 0 {
		return
	}
	_ = dst[(panels-1)*dstStep+w-1]
	_ = src[panels*w-1]
	copy32(unsafe.Pointer(&dst[0]), 4*dstStep, unsafe.Pointer(&src[0]), 4*w, panels, lowBits(min(w, 16)), lowBits(max(w-16, 0)), 4*pf)
}

// roundEdge sets dst[r·ldd + j] = bf16(alpha·e[r·32 + j] + bias[j]) for
// r < rows ≤ 12 and j < cols ≤ 32 (bias nil: no bias), rounded to nearest
// even.
func roundEdge(dst []uint16, ldd int, e []float32, bias []float32, alpha float32, rows, cols int) {
	_ = dst[(rows-1)*ldd+cols-1]
	_ = e[rows*32-1]
	var zero [32]float32
	if bias == nil {
		bias = zero[:]
	}
	_ = bias[cols-1]
	roundTile(unsafe.Pointer(&dst[0]), 2*ldd, unsafe.Pointer(&e[0]), unsafe.Pointer(&bias[0]), alpha, rows,
		lowBits(min(cols, 16)), lowBits(max(cols-16, 0)))
}
