package blas

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// naive is a plain float32 triple loop with BLAS semantics, optionally with
// one of the bugs a broken kernel or a misread ABI produces.
type naive struct{ bug string }

func (x naive) Info() Info { return Info{Name: "naive " + x.bug} }

func (x naive) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if x.bug == "ignore transB" && transB {
		transB = false
		ldb = n
	}
	for i := range m {
		for j := range n {
			var sum float32
			for p := range k {
				var av, bv float32
				if transA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if transB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				sum += av * bv
			}
			v := alpha * sum
			if beta != 0 || x.bug == "multiply NaN by beta 0" {
				v += beta * c[i*ldc+j]
			}
			if x.bug == "relative error 1e-4" && i == m-1 && j == n-1 {
				v += 1e-4 * (float32(math.Abs(float64(v))) + 1)
			}
			c[i*ldc+j] = v
		}
		if x.bug == "write padding" {
			for j := n; j < ldc && i+1 < m; j++ {
				c[i*ldc+j] = 0
			}
		}
	}
}

// TestSelfCheckAcceptsCorrectFloat32 makes sure the tolerance admits an
// honest float32 GEMM that accumulates in a different order than OpenBLAS,
// so the self-check never rejects a correct library.
func TestSelfCheckAcceptsCorrectFloat32(t *testing.T) {
	if err := selfCheck(naive{}); err != nil {
		t.Fatal(err)
	}
}

func TestSelfCheckRejectsWrongGEMMs(t *testing.T) {
	for _, bug := range []string{"ignore transB", "multiply NaN by beta 0", "relative error 1e-4", "write padding"} {
		err := selfCheck(naive{bug: bug})
		if err == nil {
			t.Errorf("self-check accepted a GEMM that does %q", bug)
			continue
		}
		t.Logf("%s: %v", bug, err)
	}
}

// TestReferenceSgemmByHand checks the float64 reference itself on products
// worked out by hand.
func TestReferenceSgemmByHand(t *testing.T) {
	a := []float32{1, 2, 3, 4} // [[1 2] [3 4]]
	b := []float32{5, 6, 7, 8} // [[5 6] [7 8]]
	c := []float32{1, -1, 2, float32(math.NaN())}
	cases := []struct {
		name           string
		transA, transB bool
		alpha, beta    float32
		want, mag      []float64
	}{
		// A·B = [[19 22] [43 50]]; NaN in C is never read when beta = 0.
		{"NN beta 0", false, false, 1, 0, []float64{19, 22, 43, 50}, []float64{19, 22, 43, 50}},
		// Aᵀ·B = [[26 30] [38 44]].
		{"TN", true, false, 1, 0, []float64{26, 30, 38, 44}, []float64{26, 30, 38, 44}},
		// A·Bᵀ = [[17 23] [39 53]].
		{"NT", false, true, 1, 0, []float64{17, 23, 39, 53}, []float64{17, 23, 39, 53}},
		// Aᵀ·Bᵀ = [[23 31] [34 46]], times -2.
		{"TT", true, true, -2, 0, []float64{-46, -62, -68, -92}, []float64{46, 62, 68, 92}},
	}
	for _, tc := range cases {
		want, mag := referenceSgemm(tc.transA, tc.transB, 2, 2, 2, tc.alpha, a, 2, b, 2, tc.beta, c, 2)
		for i := range want {
			if want[i] != tc.want[i] || mag[i] != tc.mag[i] {
				t.Errorf("%s: element %d = %g (mag %g), want %g (mag %g)", tc.name, i, want[i], mag[i], tc.want[i], tc.mag[i])
			}
		}
	}
	// beta ≠ 0 reads C: 0.5·(A·B) - 1·C on the first row, with signs in mag.
	want, mag := referenceSgemm(false, false, 1, 2, 2, 0.5, a, 2, b, 2, -1, c, 2)
	if want[0] != 8.5 || want[1] != 12 || mag[0] != 10.5 || mag[1] != 12 {
		t.Errorf("beta -1: %v mag %v, want [8.5 12] mag [10.5 12]", want, mag)
	}
}

func TestCompareSgemmRejectsNaN(t *testing.T) {
	err := compareSgemm([]float32{float32(math.NaN())}, 1, 1, 1, 1, []float64{0}, []float64{0})
	if err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN accepted: %v", err)
	}
}

// TestVerifyFallsBack checks what Load does with a library that fails the
// self-check: the Go GEMM takes over and Info says which library failed and how.
func TestVerifyFallsBack(t *testing.T) {
	if got := verify(naive{}); got != (naive{}) {
		t.Errorf("verify replaced a correct GEMM: %+v", got.Info())
	}
	got := verify(naive{bug: "multiply NaN by beta 0"})
	info := got.Info()
	if info.Name != "go" || !strings.Contains(info.Note, "naive multiply NaN by beta 0") || !strings.Contains(info.Note, "self-check") {
		t.Errorf("verify of a wrong GEMM: %+v", info)
	}
	if err := selfCheck(got); err != nil {
		t.Errorf("fallback is wrong too: %v", err)
	}
}

// TestSelect: each name gives the GEMM it names (or an error naming the
// choices), and auto never gives gonum.
func TestSelect(t *testing.T) {
	impl, err := Select("go", 2)
	if err != nil || impl.Info().Name != "go" || impl.Info().Threads != 2 {
		t.Errorf(`Select("go"): %v, %v`, impl, err)
	}
	if err := selfCheck(impl); err != nil {
		t.Errorf("the Go GEMM fails the self-check: %v", err)
	}
	auto, err := Select("", 1)
	if err != nil || auto.Info().Name == "gonum" {
		t.Errorf(`Select(""): %v, %v`, auto, err)
	}
	if PreferGo && auto.Info().Name != "go" {
		t.Errorf("auto with PreferGo chose %s", auto.Info().Name)
	}
	// Where the CPU multiplies bf16 natively, auto's bf16 products run on
	// the Go GEMM's bf16 kernel whichever GEMM does fp32, and agree with it.
	if g := NewGo(1); g.NativeBF16() {
		bf := AsBF16(auto)
		if bf == nil || !bf.NativeBF16() {
			t.Fatalf("auto (%s) on a CPU with AVX512_BF16 has no native bf16 GEMM", auto.Info().Name)
		}
		const m, n, k = 5, 7, 9
		a, b := make([]uint16, m*k), make([]uint16, k*n)
		for i := range a {
			a[i] = uint16(math.Float32bits(float32(i%7)-3) >> 16)
		}
		for i := range b {
			b[i] = uint16(math.Float32bits(float32(i%5)-2) >> 16)
		}
		got, want := make([]float32, m*n), make([]float32, m*n)
		bf.Bgemm(false, false, m, n, k, 1, a, k, b, n, 0, got, n)
		g.Bgemm(false, false, m, n, k, 1, a, k, b, n, 0, want, n)
		if !slices.Equal(got, want) {
			t.Errorf("auto's Bgemm %v, the Go GEMM's %v", got, want)
		}
	}
	if _, err := Select("mkl", 1); err == nil || !strings.Contains(err.Error(), `"mkl"`) || !strings.Contains(err.Error(), "openblas") {
		t.Errorf(`Select("mkl"): %v`, err)
	}
	t.Setenv(EnvBLAS, "mkl")
	if _, info := Default(1); info.Name != "go" || !strings.Contains(info.Note, "mkl") {
		t.Errorf("Default with $%s=mkl: %+v", EnvBLAS, info)
	}
}
