package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotrain/gotrain/model"
)

// replaceWithFIFO swaps path for a named pipe. If the test times out with
// a reader still blocked in open(2), cleanup opens the pipe for writing so
// the reader returns and the test binary can exit.
func replaceWithFIFO(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
}

// refusedQuickly runs fn, which must fail within a few seconds with an
// error naming path as a named pipe.
func refusedQuickly(t *testing.T, path string, fn func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe (FIFO)") || !strings.Contains(err.Error(), path) {
			t.Errorf("got %v, want an error naming %s as a named pipe", err, path)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("still blocked after 5s reading the FIFO %s", path)
	}
}

// TestCheckpointFilesThatAreFIFOsAreRefused: a FIFO as "latest", a tag's
// meta.json or a state file blocked resume forever in open(2), holding the
// output lock. Each is an error naming the file within seconds.
func TestCheckpointFilesThatAreFIFOsAreRefused(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	src := sourceState(cfg, 1)

	t.Run("latest", func(t *testing.T) {
		dir := t.TempDir()
		save(t, dir, lay, src, 2, 1, 0)
		latest := filepath.Join(dir, LatestFile)
		replaceWithFIFO(t, latest)
		refusedQuickly(t, latest, func() error { _, _, err := Latest(dir); return err })
		refusedQuickly(t, latest, func() error { _, err := Open(dir, ""); return err })
	})
	t.Run("meta.json", func(t *testing.T) {
		dir := t.TempDir()
		save(t, dir, lay, src, 2, 1, 0)
		meta := filepath.Join(dir, TagName(2), MetaFile)
		replaceWithFIFO(t, meta)
		refusedQuickly(t, meta, func() error { _, err := Open(dir, TagName(2)); return err })
		refusedQuickly(t, meta, func() error {
			tags, err := List(dir)
			if err != nil {
				return err
			}
			for _, ti := range tags {
				if ti.Problem != "" {
					return errors.New(ti.Problem)
				}
			}
			return nil
		})
	})
	t.Run("state file", func(t *testing.T) {
		dir := t.TempDir()
		save(t, dir, lay, src, 2, 1, 0)
		state := filepath.Join(dir, TagName(2), ExpAvg.FileName())
		replaceWithFIFO(t, state)
		refusedQuickly(t, state, func() error { _, err := Open(dir, TagName(2)); return err })
	})
}
