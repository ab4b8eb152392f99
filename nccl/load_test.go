package nccl

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	if names, source := libraryNames(LoadOptions{}); !slices.Equal(names, []string{"libnccl.so.2"}) || source != "" {
		t.Errorf("default names %v (%q)", names, source)
	}
	t.Setenv(EnvLibrary, "custom/libnccl.so.2")
	if names, _ := libraryNames(LoadOptions{Library: "x.so"}); !slices.Equal(names, []string{"x.so"}) {
		t.Errorf("LoadOptions.Library must win over the environment: %v", names)
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
