package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A save that fails part-way (a full disk, a killed job) leaves its
// ".<tag>.tmp" directory behind: on a full disk it holds the very space
// the next attempt needs, so a requeued job fails the same way forever.
// Rank 0 removes it when its save fails (Abort, Finish), and a run that
// has just taken the output lock removes those of dead runs
// (SweepPartial).

// Abort gives up the tag after cause, the error that ended the save:
// every rank closes its files, and rank 0 removes the partial
// ".<tag>.tmp" directory. It returns cause, saying on rank 0 that the
// partial directory was removed (or why it could not be). Call it when a
// save fails between NewTagWriter and Finish; both of those clean up
// after themselves.
func (w *TagWriter) Abort(cause error) error {
	w.closeFiles()
	if cause == nil {
		cause = fmt.Errorf("checkpoint %s: save abandoned", w.tag)
	}
	return w.failed(cause)
}

// removePartial deletes the tag's temporary directory, if any.
func (w *TagWriter) removePartial() error {
	tmp := filepath.Join(w.dir, tmpName(w.tag))
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove the partial checkpoint %s: %w; remove it by hand to free its space", tmp, err)
	}
	return nil
}

// failed is rank 0's cleanup for a save that failed: err, with the partial
// directory removed and the error saying so.
func (w *TagWriter) failed(err error) error {
	if err == nil || w.opts.Rank != 0 {
		return err
	}
	tmp := filepath.Join(w.dir, tmpName(w.tag))
	if _, serr := os.Lstat(tmp); serr != nil {
		return err
	}
	if rerr := w.removePartial(); rerr != nil {
		return errors.Join(err, rerr)
	}
	return fmt.Errorf("%w (the partial %s was removed)", err, tmp)
}

// Swept is one leftover SweepPartial found.
type Swept struct {
	Path  string
	Bytes int64 // disk space it held (allocated blocks, not apparent size)
	// Kept is why it was left in place ("" when it was removed).
	Kept string
}

// SweepPartial removes the ".<tag>.tmp" directories that failed or killed
// saves left in the checkpoints directory dir. Call it only while holding
// the output directory's lock (LockOutputDir): no live run is then writing
// any of them. One exception is kept: a ".<tag>.tmp" that holds a meta.json
// while <tag> does not exist is a complete checkpoint a killed save was
// about to rename into place, and is reported, not removed. A missing dir
// is no error.
func SweepPartial(dir string) ([]Swept, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look for partial checkpoints: %w", err)
	}
	var out []Swept
	for _, e := range entries {
		name := e.Name()
		tag, ok := strings.CutSuffix(strings.TrimPrefix(name, "."), ".tmp")
		if !ok || !strings.HasPrefix(name, ".") || !e.IsDir() || checkTag(tag) != nil {
			continue
		}
		path := filepath.Join(dir, name)
		s := Swept{Path: path, Bytes: diskUsage(path)}
		_, metaErr := os.Lstat(filepath.Join(path, MetaFile))
		_, tagErr := os.Lstat(filepath.Join(dir, tag))
		if metaErr == nil && errors.Is(tagErr, fs.ErrNotExist) {
			s.Kept = fmt.Sprintf("it holds a complete checkpoint a killed save was renaming into place; rename it to %s to resume from it, or remove it", filepath.Join(dir, tag))
		} else if err := os.RemoveAll(path); err != nil {
			return out, fmt.Errorf("remove the partial checkpoint %s: %w; remove it by hand to free its space", path, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// diskUsage is the space the files under path occupy on disk; the state
// files are sparse until written, so their apparent size overstates it.
func diskUsage(path string) int64 {
	var n int64
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
