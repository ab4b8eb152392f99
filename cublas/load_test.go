package cublas

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
// tried, newest first, and an override replaces them all.
func TestDefaultNames(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	names, source := libraryNames(LoadOptions{}, EnvLibrary, defaultNames())
	if want := []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}; !slices.Equal(names, want) || source != "" {
		t.Errorf("default names %v (%q), want %v", names, source, want)
	}
	names, _ = libraryNames(LoadOptions{}, EnvLtLibrary, defaultLtNames())
	if want := []string{"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"}; !slices.Equal(names, want) {
		t.Errorf("default Lt names %v, want %v", names, want)
	}
	t.Setenv(EnvLibrary, "custom/libcublas.so")
	if names, source := libraryNames(LoadOptions{}, EnvLibrary, defaultNames()); !slices.Equal(names, []string{"custom/libcublas.so"}) || source != "$"+EnvLibrary {
		t.Errorf("with %s set: %v (%q)", EnvLibrary, names, source)
	}
	if names, _ := libraryNames(LoadOptions{Library: "a.so"}, EnvLibrary, defaultNames()); !slices.Equal(names, []string{"a.so"}) {
		t.Errorf("LoadOptions.Library must win over the environment: %v", names)
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
