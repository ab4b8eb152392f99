package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// writeSynced creates path with data and fsyncs it. Only for files inside
// a tag's temporary directory, which is published as a whole by a rename.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, atomicfile.FileMode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// syncDir fsyncs a directory so the names created or renamed in it are
// durable, not only the files' contents.
func syncDir(dir string) error { return atomicfile.SyncDir(dir) }

// replaceDir renames the complete directory tmp to final. A directory
// already at final (the same step saved again, e.g. by a run resumed from
// an older tag) is swapped with tmp in one renameat2(RENAME_EXCHANGE), so
// final names a complete tag at every instant, and the old one is then
// removed. Where the file system cannot exchange, the old tag is moved
// aside first: a crash between the two renames leaves it under
// ".<tag>.old", and "latest" may name a missing tag until the next save.
func replaceDir(tmp, final string) error {
	if _, err := os.Stat(final); err != nil {
		if err := os.Rename(tmp, final); err != nil {
			return fmt.Errorf("rename %s to %s: %w", tmp, final, err)
		}
		return nil
	}
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, final, unix.RENAME_EXCHANGE)
	if err == nil {
		// tmp now holds the replaced tag.
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("remove the replaced %s (now at %s): %w", final, tmp, err)
		}
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("swap %s into %s: %w", tmp, final, err)
	}
	old := filepath.Join(filepath.Dir(final), "."+filepath.Base(final)+".old")
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	if err := os.Rename(final, old); err != nil {
		return fmt.Errorf("move the existing %s aside: %w", final, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, final, err)
	}
	if err := os.RemoveAll(old); err != nil {
		return fmt.Errorf("remove the replaced %s: %w", old, err)
	}
	return nil
}

// writeLatest points "latest" at tag: written to a temporary name, fsynced,
// renamed over the old one, directory fsynced. A reader sees the old tag or
// the new one, never a partial name.
func writeLatest(dir, tag string) error {
	if err := atomicfile.WriteFile(filepath.Join(dir, LatestFile), []byte(tag+"\n")); err != nil {
		return fmt.Errorf("update %s: %w", LatestFile, err)
	}
	return nil
}

// maxLatestBytes bounds what is read of "latest": a tag name is short, and
// a damaged file may be anything.
const maxLatestBytes = 4096

// Latest returns the tag the checkpoints directory's "latest" file names;
// ok is false when there is no such file. A file that holds no plain tag
// name is an error naming it.
func Latest(dir string) (tag string, ok bool, err error) { return readLatest(dir) }

// readLatest returns the tag "latest" names; ok is false when there is no
// such file.
func readLatest(dir string) (tag string, ok bool, err error) {
	path := filepath.Join(dir, LatestFile)
	f, _, err := regularfile.Open(`checkpoints' "latest" file`, path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxLatestBytes+1))
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxLatestBytes {
		return "", false, fmt.Errorf("%s is over %d bytes: not a tag name (damaged file; write the tag to resume from into it, e.g. %q)", path, maxLatestBytes, TagName(100))
	}
	tag = strings.TrimSpace(string(b))
	if err := checkTag(tag); err != nil {
		return "", false, fmt.Errorf("%s: %w", path, err)
	}
	return tag, true, nil
}
