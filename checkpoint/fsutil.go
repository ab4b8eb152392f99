package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// writeSynced creates path with data and fsyncs it.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
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
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
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

// replaceDir renames the complete directory tmp to final. A directory
// already at final (the same step saved twice) is moved aside first and
// removed after, because rename cannot replace a non-empty directory.
func replaceDir(tmp, final string) error {
	old := filepath.Join(filepath.Dir(final), "."+filepath.Base(final)+".old")
	moved := false
	if _, err := os.Stat(final); err == nil {
		if err := os.RemoveAll(old); err != nil {
			return err
		}
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("move the existing %s aside: %w", final, err)
		}
		moved = true
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, final, err)
	}
	if moved {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("remove the replaced %s: %w", old, err)
		}
	}
	return nil
}

// writeLatest points "latest" at tag: written to a temporary name, fsynced,
// renamed over the old one, directory fsynced. A reader sees the old tag or
// the new one, never a partial name.
func writeLatest(dir, tag string) error {
	tmp := filepath.Join(dir, "."+LatestFile+".tmp")
	if err := writeSynced(tmp, []byte(tag+"\n")); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, LatestFile)); err != nil {
		return fmt.Errorf("update %s: %w", LatestFile, err)
	}
	return syncDir(dir)
}

// readLatest returns the tag "latest" names; ok is false when there is no
// such file.
func readLatest(dir string) (tag string, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, LatestFile))
	if os.IsNotExist(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", LatestFile, err)
	}
	tag = strings.TrimSpace(string(b))
	if err := checkTag(tag); err != nil {
		return "", false, fmt.Errorf("%s in %s: %w", LatestFile, dir, err)
	}
	return tag, true, nil
}
