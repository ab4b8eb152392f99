//go:build amd64

#include "textflag.h"

// Packing helpers for the AVX-512 kernels' panels (pack_amd64.go checks
// every bound before calling). Their loads and stores are unaligned; the
// masked ones touch no memory outside their masks.

// func transpose16(dst unsafe.Pointer, ldd int, src unsafe.Pointer, lds int, rows, blocks int)
//
// For each of blocks blocks of 16 steps s: dst[s·ldd + r] = src[r·lds + s]
// for r < rows (12 or 16), in 32-bit units (a float32 or a bf16 pair);
// ldd and lds are in bytes, and both pointers advance a block at a time.
// Z0-Z15 take one row each (rows 12-15 zero when rows is 12) and the
// classic three-stage 16×16 transpose (dword, qword, then two 128-bit lane
// shuffles) leaves step s in Z_s, stored under the mask of the first rows
// units.
TEXT ·transpose16(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	MOVQ rows+32(FP), R10
	MOVQ R10, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVQ blocks+40(FP), CX
	TESTQ CX, CX
	JLE tdone

tblock:
	MOVQ SI, R11
	VMOVDQU32 (R11), Z0
	ADDQ R9, R11
	VMOVDQU32 (R11), Z1
	ADDQ R9, R11
	VMOVDQU32 (R11), Z2
	ADDQ R9, R11
	VMOVDQU32 (R11), Z3
	ADDQ R9, R11
	VMOVDQU32 (R11), Z4
	ADDQ R9, R11
	VMOVDQU32 (R11), Z5
	ADDQ R9, R11
	VMOVDQU32 (R11), Z6
	ADDQ R9, R11
	VMOVDQU32 (R11), Z7
	ADDQ R9, R11
	VMOVDQU32 (R11), Z8
	ADDQ R9, R11
	VMOVDQU32 (R11), Z9
	ADDQ R9, R11
	VMOVDQU32 (R11), Z10
	ADDQ R9, R11
	VMOVDQU32 (R11), Z11
	ADDQ R9, R11
	CMPQ R10, $16
	JNE tpad
	VMOVDQU32 (R11), Z12
	ADDQ R9, R11
	VMOVDQU32 (R11), Z13
	ADDQ R9, R11
	VMOVDQU32 (R11), Z14
	ADDQ R9, R11
	VMOVDQU32 (R11), Z15
	ADDQ R9, R11
	JMP tshuffle

tpad:
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

tshuffle:
	VPUNPCKLDQ Z1, Z0, Z16
	VPUNPCKHDQ Z1, Z0, Z17
	VPUNPCKLDQ Z3, Z2, Z18
	VPUNPCKHDQ Z3, Z2, Z19
	VPUNPCKLDQ Z5, Z4, Z20
	VPUNPCKHDQ Z5, Z4, Z21
	VPUNPCKLDQ Z7, Z6, Z22
	VPUNPCKHDQ Z7, Z6, Z23
	VPUNPCKLDQ Z9, Z8, Z24
	VPUNPCKHDQ Z9, Z8, Z25
	VPUNPCKLDQ Z11, Z10, Z26
	VPUNPCKHDQ Z11, Z10, Z27
	VPUNPCKLDQ Z13, Z12, Z28
	VPUNPCKHDQ Z13, Z12, Z29
	VPUNPCKLDQ Z15, Z14, Z30
	VPUNPCKHDQ Z15, Z14, Z31
	VPUNPCKLQDQ Z18, Z16, Z0
	VPUNPCKHQDQ Z18, Z16, Z1
	VPUNPCKLQDQ Z19, Z17, Z2
	VPUNPCKHQDQ Z19, Z17, Z3
	VPUNPCKLQDQ Z22, Z20, Z4
	VPUNPCKHQDQ Z22, Z20, Z5
	VPUNPCKLQDQ Z23, Z21, Z6
	VPUNPCKHQDQ Z23, Z21, Z7
	VPUNPCKLQDQ Z26, Z24, Z8
	VPUNPCKHQDQ Z26, Z24, Z9
	VPUNPCKLQDQ Z27, Z25, Z10
	VPUNPCKHQDQ Z27, Z25, Z11
	VPUNPCKLQDQ Z30, Z28, Z12
	VPUNPCKHQDQ Z30, Z28, Z13
	VPUNPCKLQDQ Z31, Z29, Z14
	VPUNPCKHQDQ Z31, Z29, Z15
	VSHUFI32X4 $0x88, Z4, Z0, Z16
	VSHUFI32X4 $0x88, Z5, Z1, Z17
	VSHUFI32X4 $0x88, Z6, Z2, Z18
	VSHUFI32X4 $0x88, Z7, Z3, Z19
	VSHUFI32X4 $0xdd, Z4, Z0, Z20
	VSHUFI32X4 $0xdd, Z5, Z1, Z21
	VSHUFI32X4 $0xdd, Z6, Z2, Z22
	VSHUFI32X4 $0xdd, Z7, Z3, Z23
	VSHUFI32X4 $0x88, Z12, Z8, Z24
	VSHUFI32X4 $0x88, Z13, Z9, Z25
	VSHUFI32X4 $0x88, Z14, Z10, Z26
	VSHUFI32X4 $0x88, Z15, Z11, Z27
	VSHUFI32X4 $0xdd, Z12, Z8, Z28
	VSHUFI32X4 $0xdd, Z13, Z9, Z29
	VSHUFI32X4 $0xdd, Z14, Z10, Z30
	VSHUFI32X4 $0xdd, Z15, Z11, Z31
	VSHUFI32X4 $0x88, Z24, Z16, Z0
	VSHUFI32X4 $0x88, Z25, Z17, Z1
	VSHUFI32X4 $0x88, Z26, Z18, Z2
	VSHUFI32X4 $0x88, Z27, Z19, Z3
	VSHUFI32X4 $0x88, Z28, Z20, Z4
	VSHUFI32X4 $0x88, Z29, Z21, Z5
	VSHUFI32X4 $0x88, Z30, Z22, Z6
	VSHUFI32X4 $0x88, Z31, Z23, Z7
	VSHUFI32X4 $0xdd, Z24, Z16, Z8
	VSHUFI32X4 $0xdd, Z25, Z17, Z9
	VSHUFI32X4 $0xdd, Z26, Z18, Z10
	VSHUFI32X4 $0xdd, Z27, Z19, Z11
	VSHUFI32X4 $0xdd, Z28, Z20, Z12
	VSHUFI32X4 $0xdd, Z29, Z21, Z13
	VSHUFI32X4 $0xdd, Z30, Z22, Z14
	VSHUFI32X4 $0xdd, Z31, Z23, Z15
	MOVQ DI, R12
	VMOVDQU32 Z0, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z1, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z2, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z3, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z4, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z5, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z6, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z7, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z8, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z9, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z10, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z11, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z12, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z13, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z14, K1, (R12)
	ADDQ R8, R12
	VMOVDQU32 Z15, K1, (R12)
	ADDQ R8, R12
	ADDQ $64, SI
	MOVQ R8, AX
	SHLQ $4, AX
	ADDQ AX, DI
	DECQ CX
	JNZ tblock

tdone:
	VZEROUPPER
	RET

// func interleave16(dst unsafe.Pointer, dstStep int, src0, src1 unsafe.Pointer, srcStep, panels int, lmask, smaskLo, smaskHi, pf int)
//
// For each of panels panels: the w ≤ 32 16-bit words of src0 and of src1
// under lmask, interleaved (src0[j], src1[j]) into the 2w words at dst
// under smaskLo (words 0-31) and smaskHi (words 32-63). Steps are in bytes.
// Each step also prefetches pf bytes past both sources: the rows a caller
// packs next, which the hardware prefetcher cannot guess when they lie a
// page or more apart (a transposed A).
TEXT ·interleave16(SB), NOSPLIT, $0-80
	MOVQ dst+0(FP), DI
	MOVQ dstStep+8(FP), R8
	MOVQ src0+16(FP), SI
	MOVQ src1+24(FP), DX
	MOVQ srcStep+32(FP), R9
	MOVQ panels+40(FP), CX
	MOVQ lmask+48(FP), AX
	KMOVD AX, K1
	MOVQ smaskLo+56(FP), AX
	KMOVD AX, K2
	MOVQ smaskHi+64(FP), AX
	KMOVD AX, K3
	MOVQ pf+72(FP), R10
	VMOVDQU64 pairLo<>(SB), Z4
	VMOVDQU64 pairHi<>(SB), Z5
	TESTQ CX, CX
	JLE idone

iloop:
	PREFETCHT0 (SI)(R10*1)
	PREFETCHT0 (DX)(R10*1)
	VMOVDQU16.Z (SI), K1, Z2
	VMOVDQU16.Z (DX), K1, Z3
	VMOVDQA64 Z4, Z0
	VPERMI2W Z3, Z2, Z0
	VMOVDQA64 Z5, Z1
	VPERMI2W Z3, Z2, Z1
	VMOVDQU16 Z0, K2, (DI)
	VMOVDQU16 Z1, K3, 64(DI)
	ADDQ R9, SI
	ADDQ R9, DX
	ADDQ R8, DI
	DECQ CX
	JNZ iloop

idone:
	VZEROUPPER
	RET

// func copy32(dst unsafe.Pointer, dstStep int, src unsafe.Pointer, srcStep, panels int, maskLo, maskHi, pf int)
//
// For each of panels panels: the 32-bit units 0-15 of src under maskLo and
// 16-31 under maskHi to the same places at dst. Steps are in bytes. It is
// copy() for the 48- and 128-byte runs of a panel, which the compiler
// sends through memmove. pf is interleave16's.
TEXT ·copy32(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ dstStep+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ srcStep+24(FP), R9
	MOVQ panels+32(FP), CX
	MOVQ maskLo+40(FP), AX
	KMOVW AX, K1
	MOVQ maskHi+48(FP), AX
	KMOVW AX, K2
	MOVQ pf+56(FP), R10
	TESTQ CX, CX
	JLE cdone

cloop:
	PREFETCHT0 (SI)(R10*1)
	PREFETCHT0 64(SI)(R10*1)
	VMOVDQU32.Z (SI), K1, Z0
	VMOVDQU32.Z 64(SI), K2, Z1
	VMOVDQU32 Z0, K1, (DI)
	VMOVDQU32 Z1, K2, 64(DI)
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ CX
	JNZ cloop

cdone:
	VZEROUPPER
	RET

// pairLo and pairHi pick, for VPERMI2W over (src0, src1), the words
// src0[0], src1[0], src0[1], src1[1], … of the first and second 16 pairs.
DATA pairLo<>+0(SB)/8, $0x0021000100200000
DATA pairLo<>+8(SB)/8, $0x0023000300220002
DATA pairLo<>+16(SB)/8, $0x0025000500240004
DATA pairLo<>+24(SB)/8, $0x0027000700260006
DATA pairLo<>+32(SB)/8, $0x0029000900280008
DATA pairLo<>+40(SB)/8, $0x002b000b002a000a
DATA pairLo<>+48(SB)/8, $0x002d000d002c000c
DATA pairLo<>+56(SB)/8, $0x002f000f002e000e
GLOBL pairLo<>(SB), RODATA|NOPTR, $64

DATA pairHi<>+0(SB)/8, $0x0031001100300010
DATA pairHi<>+8(SB)/8, $0x0033001300320012
DATA pairHi<>+16(SB)/8, $0x0035001500340014
DATA pairHi<>+24(SB)/8, $0x0037001700360016
DATA pairHi<>+32(SB)/8, $0x0039001900380018
DATA pairHi<>+40(SB)/8, $0x003b001b003a001a
DATA pairHi<>+48(SB)/8, $0x003d001d003c001c
DATA pairHi<>+56(SB)/8, $0x003f001f003e001e
GLOBL pairHi<>(SB), RODATA|NOPTR, $64

// func roundTile(dst unsafe.Pointer, ldd int, src, bias unsafe.Pointer, alpha float32, rows, maskLo, maskHi int)
//
// For r < rows and the columns j < 32 under maskLo (0-15) and maskHi
// (16-31): dst[r·ldd + j] = bf16(alpha·src[32r + j] + bias[j]), rounded to
// nearest even by backend.BF16FromF32's integer method (NaN kept quiet,
// subnormals rounded like normals), dst in 16-bit words with ldd in bytes.
// The multiply and the add round separately, as the kernels' alpha·acc +
// beta·C does with beta = 1.
TEXT ·roundTile(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	MOVQ src+16(FP), SI
	MOVQ bias+24(FP), DX
	VBROADCASTSS alpha+32(FP), Z6
	MOVQ rows+40(FP), CX
	MOVQ maskLo+48(FP), AX
	KMOVW AX, K1
	MOVQ maskHi+56(FP), AX
	KMOVW AX, K2
	VMOVUPS.Z (DX), K1, Z4
	VMOVUPS.Z 64(DX), K2, Z5
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z7
	MOVL $1, AX
	VPBROADCASTD AX, Z8
	MOVL $0x40, AX
	VPBROADCASTD AX, Z9
	TESTQ CX, CX
	JLE rdone

rrow:
	VMULPS (SI), Z6, Z0
	VADDPS Z4, Z0, Z0
	VMULPS 64(SI), Z6, Z1
	VADDPS Z5, Z1, Z1
	VPSRLD $16, Z0, Z2
	VPANDD Z8, Z2, Z3
	VPADDD Z7, Z3, Z3
	VPADDD Z0, Z3, Z3
	VPSRLD $16, Z3, Z3
	VCMPPS $3, Z0, Z0, K3
	VPORD Z9, Z2, K3, Z3
	VPMOVDW Z3, Y3
	VMOVDQU16 Y3, K1, (DI)
	VPSRLD $16, Z1, Z2
	VPANDD Z8, Z2, Z3
	VPADDD Z7, Z3, Z3
	VPADDD Z1, Z3, Z3
	VPSRLD $16, Z3, Z3
	VCMPPS $3, Z1, Z1, K3
	VPORD Z9, Z2, K3, Z3
	VPMOVDW Z3, Y3
	VMOVDQU16 Y3, K2, 32(DI)
	ADDQ $128, SI
	ADDQ R8, DI
	DECQ CX
	JNZ rrow

rdone:
	VZEROUPPER
	RET
