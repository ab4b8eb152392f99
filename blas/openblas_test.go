package blas

import (
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestLoadOpenBLASInfo(t *testing.T) {
	impl := loadOpenBLAS(t, 1)
	if impl == nil {
		return
	}
	info := impl.Info()
	t.Logf("%+v", info)
	if _, err := os.Stat(info.Library); err != nil {
		t.Errorf("Info.Library %q: %v", info.Library, err)
	}
	if info.Threads != 1 {
		t.Errorf("Threads = %d after asking for 1", info.Threads)
	}
	if info.CoreType == "" || !strings.Contains(info.Config, "OpenBLAS") {
		t.Errorf("CoreType %q, Config %q: want the library's own report", info.CoreType, info.Config)
	}
	if env := os.Getenv(EnvCoreType); info.CoreTypeEnv != env {
		t.Errorf("CoreTypeEnv = %q, but %s is %q", info.CoreTypeEnv, EnvCoreType, env)
	}
	// The library is loaded once per process, so the core chosen by the
	// first Load is the one it runs; it must have accepted it.
	if info.CoreTypeChosen != "" && !strings.EqualFold(info.CoreType, info.CoreTypeChosen) {
		t.Errorf("chose core %q but OpenBLAS runs %q", info.CoreTypeChosen, info.CoreType)
	}
	if want := ChooseCoreType(HostCPUFeatures()); info.CoreTypeChosen != "" && info.CoreTypeChosen != want {
		t.Errorf("CoreTypeChosen = %q, want %q for this CPU", info.CoreTypeChosen, want)
	}

	again := loadOpenBLAS(t, 2)
	if again == nil || again.Info().Threads != 2 {
		t.Errorf("second Load with 2 threads: %+v", again)
	}
}

func TestLibraryNamesPrecedence(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	names, source := libraryNames(LoadOptions{})
	if !slices.Equal(names, defaultLibraryNames("linux")) && !slices.Equal(names, defaultLibraryNames("darwin")) || source != "" {
		t.Errorf("no override: %v from %q", names, source)
	}
	if !slices.Contains(defaultLibraryNames("linux"), "libopenblas.so.0") {
		t.Errorf("linux names %v lack the Debian soname", defaultLibraryNames("linux"))
	}
	t.Setenv(EnvLibrary, "custom.so")
	if names, source := libraryNames(LoadOptions{}); !slices.Equal(names, []string{"custom.so"}) || source != "$"+EnvLibrary {
		t.Errorf("env override: %v from %q", names, source)
	}
	if names, source := libraryNames(LoadOptions{Library: "opt.so"}); !slices.Equal(names, []string{"opt.so"}) || source != "LoadOptions.Library" {
		t.Errorf("option override: %v from %q", names, source)
	}
}

// TestSgemmHugeLeadingDimension uses leading dimensions beyond C int, legal
// for a single-row matrix, which the OpenBLAS path must hand to Gonum
// rather than truncate.
func TestSgemmHugeLeadingDimension(t *testing.T) {
	for name, impl := range implementations(t) {
		tc := sgemmCase{m: 1, n: 4, k: 3, padA: 1 << 31, padC: 1 << 32, alpha: 1.5, beta: 0.5}
		if err := tc.run(impl, rand.New(rand.NewPCG(5, 6))); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestChooseCoreType(t *testing.T) {
	avx2 := CPUFeatures{AVX: true, AVX2: true, FMA: true}
	avx512 := avx2
	avx512.AVX512F, avx512.AVX512CD, avx512.AVX512BW, avx512.AVX512DQ, avx512.AVX512VL = true, true, true, true, true
	without := func(f CPUFeatures, drop func(*CPUFeatures)) CPUFeatures { drop(&f); return f }
	cases := []struct {
		name string
		f    CPUFeatures
		want string
	}{
		{"none", CPUFeatures{}, ""},
		{"AVX only (Sandy Bridge)", CPUFeatures{AVX: true}, ""},
		{"AVX2 without FMA", without(avx2, func(f *CPUFeatures) { f.FMA = false }), ""},
		{"AVX2+FMA (Haswell, Zen)", avx2, "Haswell"},
		{"full AVX-512 (Skylake-X, Zen 4)", avx512, "SkylakeX"},
		{"AVX-512F without BW (Knights Landing)", without(avx512, func(f *CPUFeatures) { f.AVX512BW = false }), "Haswell"},
		{"AVX-512 without VL", without(avx512, func(f *CPUFeatures) { f.AVX512VL = false }), "Haswell"},
		{"AVX-512 flags but no FMA", without(avx512, func(f *CPUFeatures) { f.FMA = false }), ""},
		{"AVX-512 flags, OS lacks AVX state", without(avx512, func(f *CPUFeatures) { f.AVX = false }), ""},
	}
	for _, tc := range cases {
		if got := ChooseCoreType(tc.f); got != tc.want {
			t.Errorf("%s: ChooseCoreType = %q, want %q", tc.name, got, tc.want)
		}
	}
}
