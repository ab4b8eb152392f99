//go:build !amd64

package gogemm

// Off amd64 the packing loops are Go's: hasVecPack is false and the
// helpers below are never reached.

func hasVecPack() bool { return false }

func tposeF32(dst []float32, ldd int, src []float32, lds, rows, blocks int) {
	panic("gogemm: vector packing without AVX-512")
}

func tposePairs(dst []uint16, ldd int, src []uint16, lds, rows, blocks int) {
	panic("gogemm: vector packing without AVX-512")
}

func interleaveRows(dst []uint16, dstStep int, r0, r1 []uint16, w, panels, pf int) {
	panic("gogemm: vector packing without AVX-512")
}

func copyRuns(dst []float32, dstStep int, src []float32, w, panels, pf int) {
	panic("gogemm: vector packing without AVX-512")
}

func roundEdge(dst []uint16, ldd int, e []float32, bias []float32, alpha float32, rows, cols int) {
	panic("gogemm: vector packing without AVX-512")
}
