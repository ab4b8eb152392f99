package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A writer that fails halfway leaves the old file whole and no temporary
// file behind.
func TestWriteWithFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	if err := WriteFile(path, []byte("old and complete")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("killed")
	err := WriteWith(path, func(w io.Writer) error {
		w.Write([]byte("new but only ha"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("WriteWith = %v, want the fill error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old and complete" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("leftover files: %v", ents)
	}
	if err := WriteFile(path, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Errorf("after a good write the file holds %q", b)
	}
}

// Under umask 000 a new file is 0644, not 0666.
func TestModeUnderUmaskZero(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "f")
	if err := WriteFile(path, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644", st.Mode().Perm(), err)
	}
}

func TestAbortAfterCommitKeepsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("data"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if err := f.Commit(); err == nil {
		t.Error("a second Commit succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "data" {
		t.Errorf("file holds %q", b)
	}
}
