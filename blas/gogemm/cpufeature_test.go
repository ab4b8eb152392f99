package gogemm

import (
	"os"
	"testing"
)

// envRequireAVX512, set in CI on a machine whose /proc/cpuinfo lists
// avx512bw and avx512_bf16, turns a "this CPU lacks the feature" skip into
// a failure, so a broken feature detection cannot skip the kernels' tests.
const envRequireAVX512 = "GOTRAIN_REQUIRE_AVX512"

// skipWithout skips tb when the CPU lacks feature (have false), unless CI
// requires it.
func skipWithout(tb testing.TB, have bool, feature string) {
	tb.Helper()
	if have {
		return
	}
	if os.Getenv(envRequireAVX512) != "" {
		tb.Fatalf("$%s is set but the CPU is detected without %s", envRequireAVX512, feature)
	}
	tb.Skipf("no %s: the code under test does not run on this CPU", feature)
}
