package data

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// within fails the test if f has not returned after d: the defect under
// test is a hang, which must show as a failure, not as a stuck test binary.
func within[T any](t *testing.T, d time.Duration, f func() (T, error)) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := f()
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("still blocked after %v", d)
		return nil
	}
}

func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	return path
}

// The defect: a FIFO given as --data or --val-data blocked the run forever
// in open(2), waiting for a writer. Every way a shard path reaches the
// loader (a path, a glob match) and every shard reader must refuse it at
// once, naming the path and what it is.
func TestFIFOAsShardIsRefusedQuickly(t *testing.T) {
	dir := t.TempDir()
	fifo := mkfifo(t, filepath.Join(dir, "train_000000.bin"))
	opts := func(shards ...string) LoaderOptions {
		return LoaderOptions{Shards: shards, B: 1, T: 4, WorldSize: 1, Vocab: 50257}
	}
	cases := map[string]func() (any, error){
		"NewLoader path":     func() (any, error) { return NewLoader(opts(fifo)) },
		"NewLoader glob":     func() (any, error) { return NewLoader(opts(filepath.Join(dir, "train_*.bin"))) },
		"NewEvalLoader path": func() (any, error) { return NewEvalLoader(opts(fifo), 1) },
		"ReadShardHeader":    func() (any, error) { return ReadShardHeader(fifo) },
		"ReadShard":          func() (any, error) { h, _, err := ReadShard(fifo); return h, err },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			err := within(t, 5*time.Second, f)
			wantErr(t, err, fifo, "named pipe (FIFO)", "not a regular file")
		})
	}
}

// Devices and directories are refused the same way; /dev/zero would
// otherwise read as an endless run of zero bytes.
func TestDeviceAndDirectoryAsShardAreRefused(t *testing.T) {
	for path, kind := range map[string]string{"/dev/zero": "character device", t.TempDir(): "directory"} {
		_, err := NewLoader(LoaderOptions{Shards: []string{path}, B: 1, T: 4, WorldSize: 1, Vocab: 50257})
		wantErr(t, err, path, kind)
		_, err = ReadShardHeader(path)
		wantErr(t, err, path, kind)
	}
}

// A FIFO named tokenizer.json in the data directory blocked `gotrain train`
// before its first step in the same way.
func TestFIFOAsTokenizerInfoIsRefusedQuickly(t *testing.T) {
	dir := t.TempDir()
	fifo := mkfifo(t, filepath.Join(dir, TokenizerInfoFile))
	err := within(t, 5*time.Second, func() (TokenizerInfo, error) { return ReadTokenizerInfo(dir) })
	wantErr(t, err, fifo, "named pipe (FIFO)")
}

// `gotrain data prepare --input` with a FIFO or a device named the input as
// "empty" (its size is 0); it now says what the input is.
func TestNonRegularPrepareInputIsNamed(t *testing.T) {
	dir := t.TempDir()
	fifo := mkfifo(t, filepath.Join(dir, "in.txt"))
	_, err := resolveInputs([]string{fifo}, []string{".txt"})
	wantErr(t, err, fifo, "named pipe (FIFO)")
}
