//go:build cgo

package blas

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadMissingLibrary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libopenblas-absent.so.0")
	t.Setenv(EnvLibrary, missing)
	impl, err := Load(LoadOptions{})
	if err == nil {
		t.Fatalf("Load with %s=%s succeeded: %+v", EnvLibrary, missing, impl.Info())
	}
	if !errors.Is(err, ErrNotAvailable) {
		t.Errorf("error %v does not wrap ErrNotAvailable", err)
	}
	for _, want := range []string{missing, "$" + EnvLibrary, "apt-get install libopenblas0-pthread"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	// Asked for OpenBLAS that is not there, Default runs the Go GEMM and
	// says why.
	t.Setenv(EnvBLAS, ChoiceOpenBLAS)
	impl, info := Default(1)
	if info.Name != "go" || impl.Info() != info || !strings.Contains(info.Note, missing) {
		t.Errorf("Default with a missing library: %+v / %+v", info, impl.Info())
	}
	if err := (sgemmCase{m: 5, n: 6, k: 7, alpha: 1, beta: 0.5}).run(impl, rand.New(rand.NewPCG(3, 4))); err != nil {
		t.Error(err)
	}
}

func TestLoadNotALibrary(t *testing.T) {
	bogus := filepath.Join(t.TempDir(), "libopenblas.so.0")
	if err := os.WriteFile(bogus, []byte("not an ELF file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(LoadOptions{Library: bogus})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), bogus) || !strings.Contains(err.Error(), "LoadOptions.Library") {
		t.Errorf("Load of a non-library: %v", err)
	}
}

// TestLoadLibraryWithoutCBLAS points the loader at the C math library,
// which loads but has no cblas_sgemm.
func TestLoadLibraryWithoutCBLAS(t *testing.T) {
	_, err := Load(LoadOptions{Library: "libm.so.6"})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "cblas_sgemm") {
		t.Errorf("Load of libm: %v", err)
	}
}
