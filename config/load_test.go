package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The defect: a FIFO given as --config blocked `gotrain train` forever in
// open(2), and /dev/zero read until memory ran out. Both must be refused at
// once, naming the path and what it is.
func TestFIFOAsConfigIsRefusedQuickly(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ds.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{fifo: "named pipe (FIFO)", "/dev/zero": "character device", t.TempDir(): "directory"} {
		done := make(chan error, 1)
		go func() { _, err := Load(path, Options{}); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), kind) {
				t.Errorf("Load(%s): %v, want an error naming it as a %s", path, err, kind)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Load(%s) still blocked after 5s", path)
		}
	}
	big := filepath.Join(t.TempDir(), "big.json")
	if err := os.WriteFile(big, []byte("{}"+strings.Repeat(" ", maxConfigBytes)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, Options{}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("Load of a %d-byte config: %v", maxConfigBytes+2, err)
	}
}
