package nccl

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/internal/libsearch"
)

func TestLoadMissingLibrary(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "libnccl.so.2")
	t.Setenv(EnvLibrary, missing)
	_, err := Load(LoadOptions{})
	if !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("Load with %s=%s: %v, want ErrNotAvailable", EnvLibrary, missing, err)
	}
	for _, want := range []string{missing, "$" + EnvLibrary, "libnccl2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestDefaultNames(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	s := libsearch.New(libsearch.Options{Root: t.TempDir(), Getenv: func(string) string { return "" }, PythonSites: func() []string { return nil }})
	var names []string
	for _, c := range s.Candidates(Spec()) {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"libnccl.so.2"}) {
		t.Errorf("default names %v", names)
	}
	t.Setenv(EnvLibrary, "custom/libnccl.so.2")
	if _, err := Load(LoadOptions{Library: "x.so"}); err == nil || !strings.Contains(err.Error(), "x.so (LoadOptions.Library)") || strings.Contains(err.Error(), "custom") {
		t.Errorf("LoadOptions.Library must win over the environment: %v", err)
	}
}

// TestLoadLibraryWithoutNCCL points the loader at the C math library,
// which loads but exports no NCCL.
func TestLoadLibraryWithoutNCCL(t *testing.T) {
	_, err := Load(LoadOptions{Library: "libm.so.6"})
	if !errors.Is(err, ErrNotAvailable) || !strings.Contains(err.Error(), "ncclCommInitRank") || !strings.Contains(err.Error(), "LoadOptions.Library") {
		t.Errorf("Load of libm: %v", err)
	}
}
