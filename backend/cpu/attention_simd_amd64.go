//go:build goexperiment.simd && amd64

package cpu

import "simd/archsimd"

// Attention's row operations 16 lanes wide, and a tile GEMM (attGemm,
// below). Each row operation falls back to the scalar loop without AVX-512
// or for rows shorter than a vector; a row's last len%16 elements take the
// scalar loop too. Lane sums are added in a fixed order, so results are
// deterministic.

func attRowMax(x []float32) float32 {
	n := len(x)
	if !archsimd.X86.AVX512() || n < 16 {
		return attRowMaxScalar(x)
	}
	mv := archsimd.LoadFloat32x16Slice(x)
	i := 16
	for ; i+16 <= n; i += 16 {
		mv = mv.Max(archsimd.LoadFloat32x16Slice(x[i:]))
	}
	if i < n { // the last 16, overlapping: a maximum may count an element twice
		mv = mv.Max(archsimd.LoadFloat32x16Slice(x[n-16:]))
	}
	var lanes [16]float32
	mv.Store(&lanes)
	archsimd.ClearAVXUpperBits()
	return attRowMaxScalar(lanes[:])
}

func attExpShiftSum(x []float32, c float32) float32 {
	if !archsimd.X86.AVX512() || len(x) < 16 {
		return attExpShiftSumScalar(x, c)
	}
	k := newExpConsts()
	cv := archsimd.BroadcastFloat32x16(c)
	var acc archsimd.Float32x16
	i := 0
	for ; i+16 <= len(x); i += 16 {
		e := k.exp(archsimd.LoadFloat32x16Slice(x[i:]).Sub(cv))
		e.StoreSlice(x[i:])
		acc = acc.Add(e)
	}
	var lanes [16]float32
	acc.Store(&lanes)
	archsimd.ClearAVXUpperBits()
	var s float32
	for _, v := range lanes {
		s += v
	}
	return s + attExpShiftSumScalar(x[i:], c)
}

func attExpShift(x []float32, c float32) {
	if !archsimd.X86.AVX512() {
		attExpShiftScalar(x, c)
		return
	}
	k := newExpConsts()
	cv := archsimd.BroadcastFloat32x16(c)
	i := 0
	for ; i+16 <= len(x); i += 16 {
		k.exp(archsimd.LoadFloat32x16Slice(x[i:]).Sub(cv)).StoreSlice(x[i:])
	}
	archsimd.ClearAVXUpperBits()
	attExpShiftScalar(x[i:], c)
}

func attScale(x []float32, a float32) {
	attScaleTo(x, x, a)
}

func attScaleTo(dst, src []float32, a float32) {
	if !archsimd.X86.AVX512() {
		attScaleToScalar(dst, src, a)
		return
	}
	dst = dst[:len(src)]
	av := archsimd.BroadcastFloat32x16(a)
	i := 0
	for ; i+16 <= len(src); i += 16 {
		archsimd.LoadFloat32x16Slice(src[i:]).Mul(av).StoreSlice(dst[i:])
	}
	archsimd.ClearAVXUpperBits()
	attScaleToScalar(dst[i:], src[i:], a)
}

func attDot(a, b []float32) float32 {
	if !archsimd.X86.AVX512() || len(a) < 16 {
		return attDotScalar(a, b)
	}
	b = b[:len(a)]
	var acc archsimd.Float32x16
	i := 0
	for ; i+16 <= len(a); i += 16 {
		acc = archsimd.LoadFloat32x16Slice(a[i:]).MulAdd(archsimd.LoadFloat32x16Slice(b[i:]), acc)
	}
	var lanes [16]float32
	acc.Store(&lanes)
	archsimd.ClearAVXUpperBits()
	var s float32
	for _, v := range lanes {
		s += v
	}
	return s + attDotScalar(a[i:], b[i:])
}

func attDS(ds, p []float32, dd float32) {
	if !archsimd.X86.AVX512() {
		attDSScalar(ds, p, dd)
		return
	}
	p = p[:len(ds)]
	dv := archsimd.BroadcastFloat32x16(dd)
	i := 0
	for ; i+16 <= len(ds); i += 16 {
		archsimd.LoadFloat32x16Slice(p[i:]).Mul(archsimd.LoadFloat32x16Slice(ds[i:]).Sub(dv)).StoreSlice(ds[i:])
	}
	archsimd.ClearAVXUpperBits()
	attDSScalar(ds[i:], p[i:], dd)
}

func attAdd(dst, src []float32) {
	if !archsimd.X86.AVX512() {
		attAddScalar(dst, src)
		return
	}
	dst = dst[:len(src)]
	i := 0
	for ; i+16 <= len(src); i += 16 {
		archsimd.LoadFloat32x16Slice(dst[i:]).Add(archsimd.LoadFloat32x16Slice(src[i:])).StoreSlice(dst[i:])
	}
	archsimd.ClearAVXUpperBits()
	attAddScalar(dst[i:], src[i:])
}

// attMul is one tile product, C = alpha·op(A)·B + beta·C (B never
// transposed: attention transposes K and V tiles itself): attGemm when the
// backend's GEMM is gonum's and the CPU has AVX-512, the backend's GEMM
// otherwise.
func (be *Backend) attMul(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if be.pureGoGemm && archsimd.X86.AVX512() {
		attGemm(transA, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	be.gemm.Sgemm(transA, false, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// attGemm computes C (m×n, row stride ldc) = alpha·op(A)·B + beta·C for
// attention's tile products when the backend's GEMM is gonum's: op(A)
// (m×k) is A (row stride lda) or, with transA, the transpose of the k×m
// matrix A; B is k×n (row stride ldb). With beta = 0, C is not read.
//
// Blocks of 3 rows × 32 columns keep 6 accumulators, few enough that the
// compiler holds the whole inner loop in registers: with 8 (4 × 32) it
// spilled one to the stack, and a 64-byte spill slot that straddles cache
// lines (Go aligns frames to 8 bytes) made the same call 6× slower
// depending on the caller's stack depth. A column tail of fewer than 16
// uses partial vectors. On a 64³ tile it runs at 50-65 GFLOP/s on one core
// where gonum's GEMM reaches 10-17: gonum's inner loops are calls per row
// of 64, and backward's fifth GEMM (the recomputed scores) made gonum the
// slower path. A native BLAS is faster still (80-110) and keeps the job.
func attGemm(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	ars, acs := lda, 1 // op(A)[i][p] = a[i·ars + p·acs]
	if transA {
		ars, acs = 1, lda
	}
	st := attStorer{alpha: archsimd.BroadcastFloat32x16(alpha), beta: archsimd.BroadcastFloat32x16(beta), read: beta != 0}
	i := 0
	for ; i+3 <= m; i += 3 {
		j := 0
		for ; j+32 <= n; j += 32 {
			var c00, c01, c10, c11, c20, c21 archsimd.Float32x16
			for p := range k {
				row := (*[32]float32)(b[p*ldb+j:])
				b0 := archsimd.LoadFloat32x16((*[16]float32)(row[:16]))
				b1 := archsimd.LoadFloat32x16((*[16]float32)(row[16:]))
				ap := a[i*ars+p*acs:]
				x := archsimd.BroadcastFloat32x16(ap[0])
				c00 = x.MulAdd(b0, c00)
				c01 = x.MulAdd(b1, c01)
				x = archsimd.BroadcastFloat32x16(ap[ars])
				c10 = x.MulAdd(b0, c10)
				c11 = x.MulAdd(b1, c11)
				x = archsimd.BroadcastFloat32x16(ap[2*ars])
				c20 = x.MulAdd(b0, c20)
				c21 = x.MulAdd(b1, c21)
			}
			st.put(c[i*ldc+j:][:32], c00, c01)
			st.put(c[(i+1)*ldc+j:][:32], c10, c11)
			st.put(c[(i+2)*ldc+j:][:32], c20, c21)
		}
		for ; j < n; j += 16 {
			w := min(16, n-j)
			var c0, c1, c2 archsimd.Float32x16
			for p := range k {
				bv := archsimd.LoadFloat32x16SlicePart(b[p*ldb+j:][:w])
				ap := a[i*ars+p*acs:]
				c0 = archsimd.BroadcastFloat32x16(ap[0]).MulAdd(bv, c0)
				c1 = archsimd.BroadcastFloat32x16(ap[ars]).MulAdd(bv, c1)
				c2 = archsimd.BroadcastFloat32x16(ap[2*ars]).MulAdd(bv, c2)
			}
			st.putPart(c[i*ldc+j:][:w], c0)
			st.putPart(c[(i+1)*ldc+j:][:w], c1)
			st.putPart(c[(i+2)*ldc+j:][:w], c2)
		}
	}
	for ; i < m; i++ {
		j := 0
		for ; j+32 <= n; j += 32 {
			var c0, c1 archsimd.Float32x16
			for p := range k {
				row := (*[32]float32)(b[p*ldb+j:])
				x := archsimd.BroadcastFloat32x16(a[i*ars+p*acs])
				c0 = x.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(row[:16])), c0)
				c1 = x.MulAdd(archsimd.LoadFloat32x16((*[16]float32)(row[16:])), c1)
			}
			st.put(c[i*ldc+j:][:32], c0, c1)
		}
		for ; j < n; j += 16 {
			w := min(16, n-j)
			var c0 archsimd.Float32x16
			for p := range k {
				bv := archsimd.LoadFloat32x16SlicePart(b[p*ldb+j:][:w])
				c0 = archsimd.BroadcastFloat32x16(a[i*ars+p*acs]).MulAdd(bv, c0)
			}
			st.putPart(c[i*ldc+j:][:w], c0)
		}
	}
	archsimd.ClearAVXUpperBits() // see decmath_simd_amd64.go
}

// attStorer writes accumulators as alpha·acc + beta·C.
type attStorer struct {
	alpha, beta archsimd.Float32x16
	read        bool // beta ≠ 0: C's old values count
}

// put stores two full vectors into dst[:32].
func (s attStorer) put(dst []float32, lo, hi archsimd.Float32x16) {
	lo, hi = lo.Mul(s.alpha), hi.Mul(s.alpha)
	if s.read {
		lo = archsimd.LoadFloat32x16Slice(dst).MulAdd(s.beta, lo)
		hi = archsimd.LoadFloat32x16Slice(dst[16:]).MulAdd(s.beta, hi)
	}
	lo.StoreSlice(dst)
	hi.StoreSlice(dst[16:])
}

// putPart stores the first len(dst) ≤ 16 lanes of acc.
func (s attStorer) putPart(dst []float32, acc archsimd.Float32x16) {
	acc = acc.Mul(s.alpha)
	if s.read {
		acc = archsimd.LoadFloat32x16SlicePart(dst).MulAdd(s.beta, acc)
	}
	acc.StoreSlicePart(dst)
}
