package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// sgemmCase is one GEMM to run and check against referenceSgemm.
type sgemmCase struct {
	transA, transB   bool
	m, n, k          int
	padA, padB, padC int // leading dimension minus the stored row length
	alpha, beta      float32
	nanC             bool // fill C with NaN first: only meaningful with beta == 0
}

func (tc sgemmCase) String() string {
	t := func(b bool) string {
		if b {
			return "T"
		}
		return "N"
	}
	return fmt.Sprintf("%s%s m=%d n=%d k=%d pad=%d/%d/%d alpha=%g beta=%g nanC=%v",
		t(tc.transA), t(tc.transB), tc.m, tc.n, tc.k, tc.padA, tc.padB, tc.padC, tc.alpha, tc.beta, tc.nanC)
}

// run executes tc on impl with inputs drawn from rng and checks C against
// the float64 reference, and that the padding between C's rows is left
// alone.
func (tc sgemmCase) run(impl Impl, rng *rand.Rand) error {
	rowsA, colsA := tc.m, tc.k
	if tc.transA {
		rowsA, colsA = tc.k, tc.m
	}
	rowsB, colsB := tc.k, tc.n
	if tc.transB {
		rowsB, colsB = tc.n, tc.k
	}
	lda, ldb, ldc := max(1, colsA)+tc.padA, max(1, colsB)+tc.padB, max(1, tc.n)+tc.padC
	fill := func(s []float32) {
		for i := range s {
			s[i] = 2*rng.Float32() - 1
		}
	}
	a := make([]float32, storedLen(rowsA, colsA, lda))
	b := make([]float32, storedLen(rowsB, colsB, ldb))
	c := make([]float32, storedLen(tc.m, tc.n, ldc))
	fill(a)
	fill(b)
	fill(c)
	if tc.nanC {
		for i := range tc.m {
			for j := range tc.n {
				c[i*ldc+j] = float32(math.NaN())
			}
		}
	}
	want, mag := referenceSgemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)
	before := append([]float32(nil), c...)

	impl.Sgemm(tc.transA, tc.transB, tc.m, tc.n, tc.k, tc.alpha, a, lda, b, ldb, tc.beta, c, ldc)

	for i := 0; i+1 < tc.m; i++ {
		for j := tc.n; j < ldc; j++ {
			p := i*ldc + j
			if math.Float32bits(c[p]) != math.Float32bits(before[p]) {
				return fmt.Errorf("sgemm %v: wrote padding C[%d] (row %d, column %d)", tc, p, i, j)
			}
		}
	}
	if err := compareSgemm(c, ldc, tc.m, tc.n, tc.k, want, mag); err != nil {
		return fmt.Errorf("sgemm %v: %w", tc, err)
	}
	return nil
}

// selfCheckCases cover what a miscompiled or misdetected kernel gets wrong:
// every transpose combination, sizes that are not multiples of any SIMD
// width, padded leading dimensions, alpha and beta away from 0 and 1,
// beta = 0 over NaN, and one product large enough (m·n·k > 262144) for
// OpenBLAS to split it across threads.
func selfCheckCases() []sgemmCase {
	var cases []sgemmCase
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			cases = append(cases,
				sgemmCase{transA: ta, transB: tb, m: 7, n: 5, k: 3, padA: 2, padB: 3, padC: 1, alpha: 1.5, beta: -0.75},
				sgemmCase{transA: ta, transB: tb, m: 9, n: 13, k: 11, padB: 1, padC: 4, alpha: 2, beta: 0, nanC: true},
				sgemmCase{transA: ta, transB: tb, m: 67, n: 53, k: 97, padA: 5, padC: 3, alpha: -0.5, beta: 0.25},
			)
		}
	}
	return cases
}

// selfCheck runs selfCheckCases on impl and returns the first failure.
func selfCheck(impl Impl) error {
	rng := rand.New(rand.NewPCG(0x5e1f, 0xc4ec))
	for _, tc := range selfCheckCases() {
		if err := tc.run(impl, rng); err != nil {
			return err
		}
	}
	return nil
}

// verify returns impl if it passes the self-check, and otherwise the Go
// GEMM, whose Info().Note names the failed implementation and its first wrong
// result, so a wrong GEMM is never used silently.
func verify(impl Impl) Impl {
	if err := selfCheck(impl); err != nil {
		info := impl.Info()
		return fallbackGo{Go: NewGo(info.Threads), note: fmt.Sprintf("%s %s (core %s) failed the GEMM self-check, using the Go GEMM: %v", info.Name, info.Library, info.CoreType, err)}
	}
	return impl
}
