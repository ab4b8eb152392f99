package cublas

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/internal/libsearch"
)

func TestLoadMissingLibrary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libcublas.so.12")
	t.Setenv(EnvLibrary, missing)
	_, err := Load(LoadOptions{})
	if !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("Load with %s=%s: %v, want ErrNotAvailable", EnvLibrary, missing, err)
	}
	for _, want := range []string{missing, "$" + EnvLibrary, "libcublas12 from the CUDA repository or the nvidia/cuda runtime image"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	missingLt := filepath.Join(t.TempDir(), "libcublasLt.so.12")
	_, err = LoadLt(LoadOptions{Library: missingLt})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), missingLt) ||
		!strings.Contains(err.Error(), "LoadOptions.Library") || !strings.Contains(err.Error(), EnvLtLibrary) {
		t.Errorf("LoadLt of a missing file: %v", err)
	}
}

// TestDefaultNames: without an override every CUDA major's soname is
// a candidate on the loader path, newest first, and an override replaces
// them all.
func TestDefaultNames(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	s := libsearch.New(libsearch.Options{Root: t.TempDir(), Getenv: func(string) string { return "" }, PythonSites: func() []string { return nil }})
	names := func(spec libsearch.Spec) []string {
		var out []string
		for _, c := range s.Candidates(spec) {
			out = append(out, c.Name)
		}
		return out
	}
	if got, want := names(Spec()), []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}; !slices.Equal(got, want) {
		t.Errorf("default names %v, want %v", got, want)
	}
	if got, want := names(LtSpec()), []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"}; !slices.Equal(got, want) {
		t.Errorf("default Lt names %v, want %v", got, want)
	}
	t.Setenv(EnvLibrary, "custom/libcublas.so")
	if _, err := Load(LoadOptions{}); err == nil || !strings.Contains(err.Error(), "custom/libcublas.so ($"+EnvLibrary+")") ||
		strings.Contains(err.Error(), "libcublas.so.12") {
		t.Errorf("with %s set, only its file is tried: %v", EnvLibrary, err)
	}
	if _, err := Load(LoadOptions{Library: "a.so"}); err == nil || !strings.Contains(err.Error(), "a.so (LoadOptions.Library)") ||
		strings.Contains(err.Error(), "custom") {
		t.Errorf("LoadOptions.Library must win over the environment: %v", err)
	}
}

// TestLoadLibraryWithoutCUBLAS points the loader at the C math library,
// which loads but exports none of cuBLAS.
func TestLoadLibraryWithoutCUBLAS(t *testing.T) {
	_, err := Load(LoadOptions{Library: "libm.so.6"})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "cublasCreate_v2") || !strings.Contains(err.Error(), "cublasGemmEx") {
		t.Errorf("Load of libm: %v", err)
	}
	_, err = LoadLt(LoadOptions{Library: "libm.so.6"})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "cublasLtMatmul") {
		t.Errorf("LoadLt of libm: %v", err)
	}
}
