// Package atomicfile writes the files gotrain produces (weights, exports,
// plots, rewritten logs, checkpoint metadata) so that a reader or a crash
// sees the old content or the new, never a truncated mix: the bytes go to a
// temporary file in the target's directory, which is fsynced, renamed over
// the target, and the directory fsynced.
//
// Files are created with mode 0644 and directories with 0755, so a
// permissive umask (000) never makes outputs world-writable; a stricter
// umask still narrows them.
//
// It is internal because model, metrics and checkpoint all need it and the
// import rules keep model and metrics from importing checkpoint.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Modes gotrain gives what it creates (before the umask).
const (
	FileMode os.FileMode = 0o644
	DirMode  os.FileMode = 0o755
)

// File is a file being written under a temporary name; Commit publishes it
// at its path, Abort discards it. Not safe for concurrent use.
type File struct {
	f         *os.File
	path, tmp string
	done      bool
}

// Create starts a new version of path. The temporary file lives beside
// path (same file system, so the rename is atomic) under a hidden name that
// no reader of path looks at. The directory must exist.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	for range 100 {
		tmp := filepath.Join(dir, "."+base+".tmp-"+strconv.FormatUint(rand.Uint64()>>16, 36))
		f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, FileMode)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			// The temporary name means nothing to the user; the reason does.
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("write %s: create a file in %s: %w", path, filepath.Clean(dir), err)
		}
		return &File{f: f, path: path, tmp: tmp}, nil
	}
	return nil, fmt.Errorf("write %s: no free temporary name beside it", path)
}

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Name is the path Commit publishes to.
func (f *File) Name() string { return f.path }

// Commit fsyncs and closes the temporary file, renames it over the target
// and fsyncs the directory, so the new content survives a power cut once
// Commit returns. On error the target is untouched and the temporary file
// removed.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("write %s: already committed or aborted", f.path)
	}
	f.done = true
	err := f.f.Sync()
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.tmp, f.path)
	}
	if err != nil {
		os.Remove(f.tmp)
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	return SyncDir(filepath.Dir(f.path))
}

// Abort discards the temporary file; the target keeps its old content.
// After Commit it does nothing, so `defer f.Abort()` is the cleanup idiom.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.f.Close()
	os.Remove(f.tmp)
}

// WriteFile replaces path with data.
func WriteFile(path string, data []byte) error {
	return WriteWith(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteWith replaces path with what fill writes. An error from fill leaves
// path as it was.
func WriteWith(path string, fill func(w io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := fill(f); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// SyncDir fsyncs a directory so the names created or renamed in it are
// durable, not only the files' contents.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// MkdirAll creates dir and its parents with DirMode.
func MkdirAll(dir string) error { return os.MkdirAll(dir, DirMode) }
