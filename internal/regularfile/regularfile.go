// Package regularfile opens the files gotrain reads (token shards,
// tokenizer files, documents, weights, model and DeepSpeed configs,
// checkpoints, hostfiles, secret files, metrics logs, caches) only when they
// are regular files. It is the one way gotrain opens a file for reading; a
// test scans the sources for any other (`make lint` runs it).
//
// Inputs are read with random access or to their end, so only regular files
// make sense. A named pipe would block the open until some writer appears (a
// run that hangs before its first step), a character device such as
// /dev/zero never ends, and a directory or socket cannot be read at all:
// each is refused by name before any byte is read.
//
// It is internal because data, model and config all need it and the import
// rules keep them from importing each other.
package regularfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Kind names what a non-regular file is, for messages ("a named pipe (FIFO)").
func Kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	default:
		return "a special file"
	}
}

// NotRegular is the error for a path that is m instead of a regular file.
func NotRegular(what, path string, m fs.FileMode) error {
	return fmt.Errorf("%s %s is %s, not a regular file: give a file on disk (copy a stream into a file first)", what, path, Kind(m))
}

// Open opens path for reading after checking that it is a regular file.
// The open itself is non-blocking, so a FIFO swapped in after the check
// still cannot stall it, and the open file is checked again. what names the
// file's role in messages ("token shard", "model config").
func Open(what, path string) (*os.File, fs.FileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return nil, nil, NotRegular(what, path, st.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if st, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, NotRegular(what, path, st.Mode())
	}
	return f, st, nil
}

// Read reads a small regular file whole, refusing one larger than limit
// bytes before reading it.
func Read(what, path string, limit int64) ([]byte, error) {
	f, st, err := Open(what, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > limit {
		return nil, fmt.Errorf("%s %s is %d bytes, more than the %d such a file can be; is it the right file?", what, path, st.Size(), limit)
	}
	// The file may grow after the stat: never read more than the limit.
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s %s grew past %d bytes while being read", what, path, limit)
	}
	return b, nil
}
