package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
)

// WriterOptions say where a rank stands in the job.
type WriterOptions struct {
	Rank, World int
	// Barrier returns once every rank has called it (the caller wires the
	// communicator's barrier). It separates rank 0's file creation from the
	// writes and the writes from Finish. May be nil only when World is 1.
	Barrier func() error
	// SaveTotalLimit keeps at most this many global_step<N> tags after a
	// save (0: keep all); see Prune.
	SaveTotalLimit int
}

// TagWriter writes one tag. Every rank makes one with the same dir, tag,
// layout and kinds, calls WriteRange for the flat ranges it owns, then
// Finish. WriteRange may be called from several goroutines at once (each
// write is one positioned write); NewTagWriter and Finish are collective.
type TagWriter struct {
	dir, tag string
	lay      Layout
	kinds    []Kind
	opts     WriterOptions
	dataOff  map[Kind]int64 // byte offset of flat element 0
	files    map[Kind]*os.File
}

// NewTagWriter starts tag (e.g. TagName(step)) in the checkpoints directory
// dir on every rank. Rank 0 creates dir if needed, replaces any leftover
// ".<tag>.tmp" and creates each kind's file at full size with its header;
// after the barrier every rank opens the files for writing. A rank-0
// failure still reaches the barrier, so the other ranks fail to open the
// files instead of waiting forever; it removes what it had created. A
// caller that gives up between here and Finish calls Abort.
func NewTagWriter(dir, tag string, lay Layout, kinds []Kind, opts WriterOptions) (*TagWriter, error) {
	if err := checkTag(tag); err != nil {
		return nil, err
	}
	if opts.World < 1 || opts.Rank < 0 || opts.Rank >= opts.World {
		return nil, fmt.Errorf("checkpoint %s: rank %d of world %d", tag, opts.Rank, opts.World)
	}
	if opts.Barrier == nil {
		if opts.World != 1 {
			return nil, fmt.Errorf("checkpoint %s: a world of %d ranks needs a barrier", tag, opts.World)
		}
		opts.Barrier = func() error { return nil }
	}
	if len(kinds) == 0 {
		return nil, fmt.Errorf("checkpoint %s: no state kinds to write", tag)
	}
	seen := map[Kind]bool{}
	for _, k := range kinds {
		if !k.valid() || seen[k] {
			return nil, fmt.Errorf("checkpoint %s: bad or repeated state kind %q (want some of %v)", tag, k, AllKinds())
		}
		seen[k] = true
	}
	w := &TagWriter{dir: dir, tag: tag, lay: lay, kinds: append([]Kind(nil), kinds...), opts: opts,
		dataOff: map[Kind]int64{}, files: map[Kind]*os.File{}}
	tmp := filepath.Join(dir, tmpName(tag))
	var createErr error
	if opts.Rank == 0 {
		createErr = w.failed(w.create(tmp))
	}
	if err := opts.Barrier(); err != nil {
		return nil, fmt.Errorf("checkpoint %s: barrier after creating files: %w", tag, err)
	}
	if createErr != nil {
		return nil, createErr
	}
	for _, k := range w.kinds {
		path := filepath.Join(tmp, k.FileName())
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			w.closeFiles()
			return nil, fmt.Errorf("checkpoint %s: rank %d: %w", tag, opts.Rank, err)
		}
		w.files[k] = f
		w.dataOff[k] = int64(len(fileHeader(lay, k)))
	}
	return w, nil
}

// create lays out the temporary directory and its files (rank 0).
func (w *TagWriter) create(tmp string) error {
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.tag, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("checkpoint %s: remove leftover %s: %w", w.tag, tmp, err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return fmt.Errorf("checkpoint %s: %w", w.tag, err)
	}
	for _, k := range w.kinds {
		path := filepath.Join(tmp, k.FileName())
		hdr := fileHeader(w.lay, k)
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", w.tag, err)
		}
		_, err = f.Write(hdr)
		if err == nil {
			// Full size up front so ranks write in any order; unwritten
			// ranges are holes, and a rank that never wrote its range
			// cannot pass for a complete tag because Finish only runs after
			// the barrier that follows every rank's writes.
			err = f.Truncate(int64(len(hdr)) + 4*int64(w.lay.NumParams()))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("checkpoint %s: create %s: %w", w.tag, path, err)
		}
	}
	return nil
}

// writeChunk bounds the encode buffer of one WriteRange call.
const writeChunk = 1 << 18 // elements (1 MiB)

// WriteRange stores vals as flat elements [flatOff, flatOff+len(vals)) of
// kind. The range may cross tensor boundaries: the file holds tensors in
// layout order without gaps, so it is one contiguous byte range.
func (w *TagWriter) WriteRange(kind Kind, flatOff int, vals []float32) error {
	f, ok := w.files[kind]
	if !ok {
		return fmt.Errorf("checkpoint %s: state kind %q is not being written (have %v)", w.tag, kind, w.kinds)
	}
	if flatOff < 0 || flatOff+len(vals) > w.lay.NumParams() {
		return fmt.Errorf("checkpoint %s: %s range [%d, %d) outside the %d parameters", w.tag, kind, flatOff, flatOff+len(vals), w.lay.NumParams())
	}
	buf := make([]byte, 4*min(len(vals), writeChunk))
	for done := 0; done < len(vals); {
		n := min(len(vals)-done, writeChunk)
		b := buf[:4*n]
		for i, x := range vals[done : done+n] {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		if _, err := f.WriteAt(b, w.dataOff[kind]+4*int64(flatOff+done)); err != nil {
			return fmt.Errorf("checkpoint %s: write %s [%d, %d): %w", w.tag, kind, flatOff+done, flatOff+done+n, err)
		}
		done += n
	}
	return nil
}

// closeFiles closes every handle, keeping the first error.
func (w *TagWriter) closeFiles() error {
	var first error
	for k, f := range w.files {
		if err := f.Close(); err != nil && first == nil {
			first = fmt.Errorf("checkpoint %s: close %s: %w", w.tag, k.FileName(), err)
		}
		delete(w.files, k)
	}
	return first
}

// syncFiles flushes this rank's writes: on a shared file system each rank
// must make its own pages durable before rank 0 declares the tag complete.
func (w *TagWriter) syncFiles() error {
	var errs []error
	for k, f := range w.files {
		if err := f.Sync(); err != nil {
			errs = append(errs, fmt.Errorf("checkpoint %s: fsync %s: %w", w.tag, k.FileName(), err))
		}
	}
	if err := w.closeFiles(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
