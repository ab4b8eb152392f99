package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfigValidateFIFOIsRefusedQuickly: `config validate FILE` sniffed
// the file's kind with a plain read first, so a FIFO blocked it forever.
func TestConfigValidateFIFOIsRefusedQuickly(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "ds.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Unblocks a reader left in open(2) if the check below times out.
	t.Cleanup(func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	done := make(chan error, 1)
	go func() {
		_, _, err := run(t, "config", "validate", fifo)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe (FIFO)") || !strings.Contains(err.Error(), fifo) {
			t.Errorf("config validate on a FIFO: %v, want an error naming %s as a named pipe", err, fifo)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("config validate %s still blocked after 5s", fifo)
	}
}
