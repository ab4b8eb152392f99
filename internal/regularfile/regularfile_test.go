package regularfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, kind string }{
		{fifo, "a named pipe (FIFO)"}, {dir, "a directory"}, {"/dev/zero", "a character device"},
	} {
		start := time.Now()
		_, err := Read("token shard", tc.path, 1<<20)
		if err == nil || !strings.Contains(err.Error(), tc.kind) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("Read(%s) = %v, want an error naming it as %s", tc.path, err, tc.kind)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Read(%s) took %v", tc.path, d)
		}
	}
}

func TestReadLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := Read("config", p, 5); err != nil || string(b) != "12345" {
		t.Errorf("Read at the limit = %q, %v", b, err)
	}
	if _, err := Read("config", p, 4); err == nil || !strings.Contains(err.Error(), "more than the 4") {
		t.Errorf("Read over the limit = %v", err)
	}
}
