package gogemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// toBF16 rounds x to the nearest bfloat16, ties to even (finite x only).
func toBF16(x float32) uint16 {
	u := math.Float32bits(x)
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

func widenAll(s []uint16) []float32 {
	out := make([]float32, len(s))
	for i, h := range s {
		out[i] = bf16(h)
	}
	return out
}

// bgemms is every way a build computes Bgemm: the pair kernel of the CPU
// (if any) on one to three goroutines, the portable pair kernel (which
// checks the pair packing on any CPU), and widening into the fp32 kernels.
func bgemms() []*Gemm {
	var out []*Gemm
	if bestBF16Kernel() != nil {
		out = append(out, New(1), New(2), New(3))
	}
	pair := NewGeneric(2)
	pair.bkern = genericBF16Kernel()
	widen := New(2)
	widen.bkern = nil
	return append(out, pair, widen, NewGeneric(1))
}

// checkB runs one case through Bgemm and compares every element of C, and
// the padding around it, with the float64 product of the widened
// operands. The products are exact in fp32, so the only error is the
// rounding of the sums: the fp32 Sgemm bound.
func checkB(t *testing.T, g *Gemm, tc gemmCase, rng *rand.Rand) {
	t.Helper()
	rowsA, colsA := tc.m, tc.k
	if tc.ta {
		rowsA, colsA = tc.k, tc.m
	}
	rowsB, colsB := tc.k, tc.n
	if tc.tb {
		rowsB, colsB = tc.n, tc.k
	}
	lda, ldb, ldc := colsA+tc.pad, colsB+tc.pad, tc.n+tc.pad
	fill := func(n int) []uint16 {
		s := make([]uint16, n)
		for i := range s {
			s[i] = toBF16(rng.Float32()*2 - 1)
		}
		return s
	}
	a := fill(tc.off + rowsA*lda)[tc.off:]
	b := fill(tc.off + rowsB*ldb)[tc.off:]
	c := make([]float32, tc.off+tc.m*ldc)[tc.off:]
	for i := range c {
		c[i] = rng.Float32()*2 - 1
		if tc.beta == 0 && i%ldc < tc.n {
			c[i] = float32(math.NaN()) // beta = 0 overwrites
		}
	}
	orig := append([]float32(nil), c...)
	want := refGemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, widenAll(a), lda, widenAll(b), ldb, tc.beta, c, ldc)
	g.Bgemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
	tol := 1e-6 * float64(tc.k+4) * 4
	for i := range tc.m {
		for j := range ldc {
			got := c[i*ldc+j]
			if j >= tc.n {
				if got != orig[i*ldc+j] {
					t.Fatalf("%v (%s): padding C[%d][%d] changed from %g to %g", tc, g.BF16Kernel(), i, j, orig[i*ldc+j], got)
				}
				continue
			}
			w := want[i*tc.n+j]
			if d := math.Abs(float64(got) - w); !(d <= tol*(1+math.Abs(w))) {
				t.Fatalf("%v (%s): C[%d][%d] = %g, want %g (|diff| %g)", tc, g.BF16Kernel(), i, j, got, w, d)
			}
		}
	}
}

// TestBgemmConformance: every transpose combination over odd shapes (odd k
// pads the last pair), unaligned starts, wide leading dimensions,
// overwrite over NaN, accumulate and general alpha/beta, for every way of
// computing.
func TestBgemmConformance(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	sizes := []int{1, 2, 3, 5, 11, 12, 13, 31, 32, 33, 47, 64, 67}
	for _, g := range bgemms() {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for it := range 30 {
					tc := gemmCase{ta: ta, tb: tb,
						m: sizes[rng.IntN(len(sizes))], n: sizes[rng.IntN(len(sizes))], k: sizes[rng.IntN(len(sizes))],
						pad: []int{0, 3}[it%2], off: it % 5,
						alpha: []float32{1, -0.75, 1.25}[it%3], beta: []float32{0, 1, -0.5}[(it/3)%3]}
					checkB(t, g, tc, rng)
				}
			}
		}
	}
}

// TestBgemmBlocks crosses the KC (with an odd remainder), MC and NC block
// edges and the parallel split.
func TestBgemmBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	cases := []gemmCase{
		{m: 130, n: 1100, k: 301, alpha: 1, beta: 1},
		{ta: true, m: 257, n: 67, k: 513, pad: 1, off: 3, alpha: 0.5, beta: 0},
		{tb: true, m: 200, n: 2100, k: 260, off: 1, alpha: 1, beta: 0},
		{ta: true, tb: true, m: 97, n: 129, k: 599, pad: 2, alpha: -1, beta: 2},
	}
	for _, g := range bgemms() {
		for _, tc := range cases {
			checkB(t, g, tc, rng)
		}
	}
}

// TestBF16KernelMatchesScalar runs the VDPBF16PS kernel on packed panels of
// small integers, whose products and sums are exact in fp32, so every one
// of the 12×32 outputs must equal the scalar dot product bit for bit: an
// instruction encoded with a wrong register lands in the wrong accumulator
// or reads the wrong operand and fails here. A second pass with random
// values checks beta ≠ 0 and alpha scaling within fp32 rounding.
func TestBF16KernelMatchesScalar(t *testing.T) {
	kern := bestBF16Kernel()
	if kern == nil {
		t.Log("no AVX512_BF16 on this CPU: the pair kernel is not built in; the widening path is tested instead")
		return
	}
	rng := rand.New(rand.NewPCG(15, 16))
	const mr, nr = 12, 32
	for _, kp := range []int{1, 2, 7, 128} {
		a := make([]uint16, 2*mr*kp)
		b := make([]uint16, 2*nr*kp)
		for i := range a {
			a[i] = toBF16(float32(rng.IntN(17) - 8))
		}
		for i := range b {
			b[i] = toBF16(float32(rng.IntN(17) - 8))
		}
		const ldc = nr + 5
		c := make([]float32, mr*ldc)
		for i := range c {
			c[i] = float32(i % 7)
		}
		orig := append([]float32(nil), c...)
		kern.fn(kp, a, b, c, ldc, 1, 0)
		for i := range mr {
			for j := range ldc {
				if j >= nr {
					if c[i*ldc+j] != orig[i*ldc+j] {
						t.Fatalf("kp=%d: C[%d][%d] outside the tile changed", kp, i, j)
					}
					continue
				}
				var want float64
				for p := range kp {
					for s := range 2 {
						want += float64(bf16(a[(p*mr+i)*2+s])) * float64(bf16(b[(p*nr+j)*2+s]))
					}
				}
				if got := c[i*ldc+j]; float64(got) != want {
					t.Fatalf("kp=%d: C[%d][%d] = %g, want %g exactly", kp, i, j, got, want)
				}
			}
		}
		// Accumulate: C = 0.5·AB + 2·C over random values.
		for i := range a {
			a[i] = toBF16(rng.Float32()*2 - 1)
		}
		for i := range b {
			b[i] = toBF16(rng.Float32()*2 - 1)
		}
		for i := range c {
			c[i] = rng.Float32()
		}
		copy(orig, c)
		kern.fn(kp, a, b, c, ldc, 0.5, 2)
		for i := range mr {
			for j := range nr {
				var s float64
				for p := range kp {
					for t := range 2 {
						s += float64(bf16(a[(p*mr+i)*2+t])) * float64(bf16(b[(p*nr+j)*2+t]))
					}
				}
				want := 0.5*s + 2*float64(orig[i*ldc+j])
				if d := math.Abs(float64(c[i*ldc+j]) - want); d > 1e-6*float64(2*kp+4)*4*(1+math.Abs(want)) {
					t.Fatalf("kp=%d accumulate: C[%d][%d] = %g, want %g", kp, i, j, c[i*ldc+j], want)
				}
			}
		}
	}
}

// TestBgemmMatchesSgemm: on the widened operands Bgemm and Sgemm agree to
// fp32 rounding of the sums, the promise the CPU backend's bf16 matmuls
// rest on.
func TestBgemmMatchesSgemm(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	m, n, k := 77, 300, 257
	a := make([]uint16, m*k)
	b := make([]uint16, n*k)
	for i := range a {
		a[i] = toBF16(rng.Float32() - 0.5)
	}
	for i := range b {
		b[i] = toBF16(rng.Float32() - 0.5)
	}
	g := New(2)
	cb := make([]float32, m*n)
	cs := make([]float32, m*n)
	g.Bgemm(false, true, m, n, k, 1, a, k, b, k, 0, cb, n)
	g.Sgemm(false, true, m, n, k, 1, widenAll(a), k, widenAll(b), k, 0, cs, n)
	for i := range cb {
		if d := math.Abs(float64(cb[i] - cs[i])); d > 1e-6*float64(k)*2*(1+math.Abs(float64(cs[i]))) {
			t.Fatalf("C[%d]: Bgemm %g, Sgemm %g", i, cb[i], cs[i])
		}
	}
}

// TestBgemmRound holds BgemmRound to Bgemm with beta = 1 over C rows
// holding the bias, each result then rounded to bf16: bit for bit, since
// both take the same kernel sums and round alpha·sum + bias the same way.
// Shapes cross the tile edges and the parallel split, all transposes, with
// and without a bias, a wider ldc whose padding must stay untouched, and
// NaN from a NaN operand kept NaN.
func TestBgemmRound(t *testing.T) {
	g := New(2)
	if !g.BgemmRound(false, false, 1, 1, 1, 1, []uint16{0}, 1, []uint16{0}, 1, nil, []uint16{0}, 1) {
		if bestBF16Kernel() != nil && hasVecPack() {
			t.Fatal("BgemmRound declined a one-slab product on a CPU with the pair kernel")
		}
		skipWithout(t, false, "AVX512_BF16 (BgemmRound declines and callers round Bgemm's output)")
	}
	if g.BgemmRound(false, false, 1, 1, 513, 1, make([]uint16, 513), 513, make([]uint16, 513), 1, nil, []uint16{0}, 1) {
		t.Fatal("BgemmRound took a k of two slabs")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	cases := []gemmCase{
		{m: 1, n: 1, k: 1, alpha: 1}, {m: 13, n: 33, k: 7, alpha: 1}, {m: 12, n: 32, k: 256, pad: 3, alpha: -0.5},
		{m: 67, n: 47, k: 64, pad: 1, alpha: 1}, {m: 300, n: 700, k: 200, alpha: 1.25}, {m: 150, n: 2100, k: 512, pad: 2, alpha: 1},
	}
	for _, base := range cases {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, withBias := range []bool{false, true} {
					tc := base
					tc.ta, tc.tb = ta, tb
					checkRound(t, g, tc, withBias, rng)
				}
			}
		}
	}
}

// checkRound runs one case through BgemmRound and compares C, and the
// padding beside it, with Bgemm over the bias rows rounded to bf16.
func checkRound(t *testing.T, g *Gemm, tc gemmCase, withBias bool, rng *rand.Rand) {
	t.Helper()
	rowsA, colsA := tc.m, tc.k
	if tc.ta {
		rowsA, colsA = tc.k, tc.m
	}
	rowsB, colsB := tc.k, tc.n
	if tc.tb {
		rowsB, colsB = tc.n, tc.k
	}
	lda, ldb, ldc := colsA+tc.pad, colsB+tc.pad, tc.n+tc.pad
	a, b := make([]uint16, rowsA*lda), make([]uint16, rowsB*ldb)
	for i := range a {
		a[i] = toBF16(rng.Float32()*2 - 1)
	}
	for i := range b {
		b[i] = toBF16(rng.Float32()*2 - 1)
	}
	var bias []float32
	if withBias {
		bias = make([]float32, tc.n)
		for j := range bias {
			bias[j] = rng.Float32()*4 - 2
		}
	}
	if tc.m*tc.k > 3 {
		a[3] = 0x7fc1 // a quiet NaN with a payload
	}
	c32 := make([]float32, tc.m*ldc)
	for i := range tc.m {
		if bias != nil {
			copy(c32[i*ldc:], bias)
		}
	}
	g.Bgemm(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, 1, c32, ldc)
	c16 := make([]uint16, tc.m*ldc)
	for i := range c16 {
		c16[i] = 0xbeef
	}
	if !g.BgemmRound(tc.ta, tc.tb, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, bias, c16, ldc) {
		skipWithout(t, g.bkern != nil && g.vec, "AVX512_BF16 (BgemmRound declines)")
		t.Fatalf("%v: declined", tc)
	}
	for i := range tc.m {
		for j := range ldc {
			got := c16[i*ldc+j]
			if j >= tc.n {
				if got != 0xbeef {
					t.Fatalf("%v bias=%v: padding C[%d][%d] written", tc, withBias, i, j)
				}
				continue
			}
			x := c32[i*ldc+j]
			want := toBF16(x)
			if x != x {
				want = uint16(math.Float32bits(x)>>16) | 0x40
			}
			if got != want {
				t.Fatalf("%v bias=%v: C[%d][%d] = %#04x, Bgemm rounded gives %#04x (%g)", tc, withBias, i, j, got, want, x)
			}
		}
	}
}
