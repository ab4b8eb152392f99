package emu

import (
	"os"
	"os/exec"
	"testing"
)

// ForTest builds gotrain's kernel program for emulation (reusing a cached
// build), points the mock CUDA driver at it through EnvLibrary for the
// rest of tb, and opens it. It skips tb only when g++ is missing and
// $GOTRAIN_REQUIRE_EMU is not 1.
func ForTest(tb testing.TB) *Library {
	tb.Helper()
	return ForTestUnit(tb, Program())
}

// ForTestUnit is ForTest for any unit (tests of the emulator itself).
func ForTestUnit(tb testing.TB, u Unit) *Library {
	tb.Helper()
	if _, err := exec.LookPath("g++"); err != nil {
		if os.Getenv("GOTRAIN_REQUIRE_EMU") == "1" {
			tb.Fatalf("g++ is required for the kernel emulation ($GOTRAIN_REQUIRE_EMU=1): %v", err)
		}
		tb.Skipf("g++ not found, kernels cannot be emulated: %v", err)
	}
	dir, err := DefaultCacheDir()
	if err != nil {
		dir = tb.TempDir()
	}
	path, err := Build(u, dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Setenv(EnvLibrary, path)
	lib, err := Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	return lib
}
