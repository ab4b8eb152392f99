package blas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// envRequireOpenBLAS, set to 1 in CI, turns "OpenBLAS did not load" from a
// logged note into a test failure.
const envRequireOpenBLAS = "GOTRAIN_REQUIRE_OPENBLAS"

// envRequireAVX512, set in CI where /proc/cpuinfo lists avx512bw and
// avx512_bf16, turns a "the CPU lacks AVX512_BF16" skip into a failure.
const envRequireAVX512 = "GOTRAIN_REQUIRE_AVX512"

// loadOpenBLAS loads OpenBLAS for a test or benchmark. It returns nil when
// the library is absent and not required; a load that fell back to Gonum
// (self-check failure) is always a failure.
func loadOpenBLAS(tb testing.TB, threads int) Impl {
	tb.Helper()
	impl, err := Load(LoadOptions{Threads: threads})
	if err != nil {
		if os.Getenv(envRequireOpenBLAS) == "1" {
			tb.Fatalf("%s=1 but OpenBLAS did not load: %v", envRequireOpenBLAS, err)
		}
		tb.Logf("OpenBLAS not available, testing gonum only: %v", err)
		return nil
	}
	if info := impl.Info(); info.Name != "openblas" {
		tb.Fatalf("OpenBLAS loaded but was replaced: %s", info.Note)
	}
	return impl
}

// implementations returns every Impl this machine can run.
func implementations(t *testing.T) map[string]Impl {
	impls := map[string]Impl{"gonum": Gonum{}, "go": NewGo(2), "go-1thread": NewGo(1)}
	if o := loadOpenBLAS(t, 0); o != nil {
		impls["openblas"] = o
	}
	if o := loadOpenBLAS(t, 3); o != nil {
		impls["openblas-split3"] = o
	}
	return impls
}

// conformanceCases: every transpose combination over degenerate, odd and
// multi-block shapes, with tight and padded leading dimensions, overwrite
// (beta = 0 over NaN), accumulate (beta = 1) and general alpha/beta.
func conformanceCases() []sgemmCase {
	type ab struct {
		alpha, beta float32
		nanC        bool
	}
	var cases []sgemmCase
	for _, ta := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			// The last two are large enough (m·n·k ≥ 2²¹) to be split over
			// goroutines, once along m and once along n.
			for _, s := range [][3]int{{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {3, 70, 129}, {301, 67, 110}, {45, 613, 77}} {
				for _, pad := range [][3]int{{0, 0, 0}, {3, 1, 5}} {
					for _, v := range []ab{{1, 0, true}, {1, 1, false}, {-0.75, 1, false}, {1.25, -0.5, false}} {
						cases = append(cases, sgemmCase{
							transA: ta, transB: tb, m: s[0], n: s[1], k: s[2],
							padA: pad[0], padB: pad[1], padC: pad[2],
							alpha: v.alpha, beta: v.beta, nanC: v.nanC,
						})
					}
				}
			}
		}
	}
	return cases
}

func TestSgemmConformance(t *testing.T) {
	for name, impl := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			for _, tc := range conformanceCases() {
				if err := tc.run(impl, rng); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestSgemmSelfCheckCases runs the load-time self-check on every Impl: it
// must pass on correct GEMMs, or Load would always fall back.
func TestSgemmSelfCheckCases(t *testing.T) {
	for name, impl := range implementations(t) {
		if err := selfCheck(impl); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSgemmNotReadWhenUnneeded checks the BLAS rules that alpha = 0 or
// k = 0 leave A and B unread (NaN there must not reach C) and make
// C = beta·C, and that empty products touch nothing, even with nil slices.
func TestSgemmNotReadWhenUnneeded(t *testing.T) {
	nan := float32(math.NaN())
	for name, impl := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			a := []float32{nan, nan, nan, nan, nan, nan}
			b := []float32{nan, nan, nan, nan, nan, nan}
			for _, beta := range []float32{0, 1, -2} {
				c := []float32{1, 2, 3, 4}
				impl.Sgemm(false, false, 2, 2, 3, 0, a, 3, b, 2, beta, c, 2)
				for i, v := range c {
					if want := beta * float32(i+1); v != want {
						t.Errorf("alpha=0 beta=%g: C[%d] = %g, want %g", beta, i, v, want)
					}
				}
				c = []float32{1, 2, 3, 4}
				impl.Sgemm(true, true, 2, 2, 0, 1.5, nil, 2, nil, 1, beta, c, 2)
				for i, v := range c {
					if want := beta * float32(i+1); v != want {
						t.Errorf("k=0 beta=%g: C[%d] = %g, want %g", beta, i, v, want)
					}
				}
			}
			c := []float32{nan, 7}
			impl.Sgemm(false, false, 0, 2, 3, 1, nil, 3, nil, 2, 0, nil, 2)
			impl.Sgemm(false, false, 2, 0, 3, 1, nil, 3, nil, 1, 0, nil, 1)
			impl.Sgemm(false, true, 0, 0, 0, 1, nil, 1, nil, 1, 0, c, 1)
			if !math.IsNaN(float64(c[0])) || c[1] != 7 {
				t.Errorf("empty product changed C: %v", c)
			}
		})
	}
}

// TestSgemmBadArguments checks that each kind of bad argument panics with
// its fixed message on every Impl, before any native code runs.
func TestSgemmBadArguments(t *testing.T) {
	s := func(n int) []float32 { return make([]float32, n) }
	cases := []struct {
		want string
		call func(Impl)
	}{
		{msgMLT0, func(i Impl) { i.Sgemm(false, false, -1, 2, 2, 1, s(4), 2, s(4), 2, 0, s(4), 2) }},
		{msgNLT0, func(i Impl) { i.Sgemm(false, false, 2, -1, 2, 1, s(4), 2, s(4), 2, 0, s(4), 2) }},
		{msgKLT0, func(i Impl) { i.Sgemm(false, false, 2, 2, -1, 1, s(4), 2, s(4), 2, 0, s(4), 2) }},
		{msgBadLdA, func(i Impl) { i.Sgemm(false, false, 2, 2, 3, 1, s(9), 2, s(9), 2, 0, s(4), 2) }},
		{msgBadLdA, func(i Impl) { i.Sgemm(true, false, 3, 2, 2, 1, s(9), 2, s(9), 2, 0, s(9), 2) }},
		{msgBadLdB, func(i Impl) { i.Sgemm(false, true, 2, 2, 3, 1, s(9), 3, s(9), 2, 0, s(4), 2) }},
		{msgBadLdB, func(i Impl) { i.Sgemm(false, false, 2, 3, 2, 1, s(9), 2, s(9), 2, 0, s(9), 3) }},
		{msgBadLdC, func(i Impl) { i.Sgemm(false, false, 2, 3, 2, 1, s(9), 2, s(9), 3, 0, s(9), 2) }},
		{msgBadLdC, func(i Impl) { i.Sgemm(false, false, 0, 0, 0, 1, nil, 1, nil, 1, 0, nil, 0) }},
		{msgShortA, func(i Impl) { i.Sgemm(false, false, 2, 2, 2, 1, s(3), 2, s(4), 2, 0, s(4), 2) }},
		{msgShortA, func(i Impl) { i.Sgemm(true, false, 2, 2, 3, 1, s(5), 2, s(6), 2, 0, s(4), 2) }},
		{msgShortB, func(i Impl) { i.Sgemm(false, true, 2, 3, 2, 1, s(4), 2, s(5), 2, 0, s(6), 3) }},
		{msgShortC, func(i Impl) { i.Sgemm(false, false, 2, 2, 2, 1, s(4), 2, s(4), 2, 0, s(4), 3) }},
		{msgShortC, func(i Impl) { i.Sgemm(false, false, 2, 2, 0, 1, nil, 1, nil, 2, 0, s(3), 2) }},
	}
	for name, impl := range implementations(t) {
		for n, tc := range cases {
			got := func() (msg any) {
				defer func() { msg = recover() }()
				tc.call(impl)
				return nil
			}()
			if got != tc.want {
				t.Errorf("%s case %d: panic %v, want %q", name, n, got, tc.want)
			}
		}
	}
}

// TestSgemmConcurrent runs products from several goroutines at once on one
// Impl, as the CPU backend may, and checks every result.
func TestSgemmConcurrent(t *testing.T) {
	for name, impl := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for g := range errs {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 7))
					for r := range 6 {
						tc := sgemmCase{transA: r%2 == 1, transB: g%2 == 1, m: 67, n: 45, k: 90 + g, padA: g, alpha: 0.5, beta: -1}
						if err := tc.run(impl, rng); err != nil {
							errs[g] = fmt.Errorf("goroutine %d round %d: %w", g, r, err)
							return
						}
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}
