package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// TagInfo describes one tag directory for `gotrain checkpoint inspect`.
type TagInfo struct {
	Tag       string
	Step      int64 // from meta.json, else from the name; -1 when neither says
	WorldSize int   // 0 when incomplete
	Stage     int
	Bytes     int64  // sum of the directory's file sizes
	Complete  bool   // meta.json is present, parses and matches its checksum
	Legacy    bool   // meta.json predates its checksum (format version 1)
	Problem   string // why the tag is not complete
	RunID     string // the lineage that wrote it ("" for legacy tags)
	Latest    bool   // "latest" names this tag
}

// List describes every tag in the checkpoints directory dir, oldest step
// first. Names starting with '.' (saves in progress or interrupted) are not
// tags and are skipped. A damaged "latest" is not an error here: no tag is
// marked latest, and Open reports the damage.
func List(dir string) ([]TagInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	latest, _, _ := readLatest(dir)
	var out []TagInfo
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info := TagInfo{Tag: e.Name(), Step: -1, Latest: e.Name() == latest}
		if n, ok := tagStep(e.Name()); ok {
			info.Step = n
		}
		m, legacy, err := readMeta(filepath.Join(dir, e.Name()))
		switch {
		case errors.Is(err, os.ErrNotExist):
			info.Problem = "incomplete: no " + MetaFile + " (the save was interrupted)"
		case err != nil:
			info.Problem = err.Error()
		default:
			info.Complete, info.Legacy = true, legacy
			info.Step, info.WorldSize, info.Stage, info.RunID = m.Step, m.WorldSize, m.Stage, m.RunID
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
		for _, f := range files {
			if fi, err := f.Info(); err == nil && fi.Mode().IsRegular() {
				info.Bytes += fi.Size()
			}
		}
		out = append(out, info)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Step != out[j].Step {
			return out[i].Step < out[j].Step
		}
		return out[i].Tag < out[j].Tag
	})
	return out, nil
}

// Prune deletes, of the complete global_step<N> tags that the lineage runID
// wrote at a step ≤ step, all but the keep newest, and returns the removed
// tags. It never deletes the tag "latest" names, a tag of another lineage
// (an earlier run in the same directory, or a legacy tag without a run
// id), a tag with a higher step than the one just saved, an incomplete
// tag, or a tag with another name. It runs only after a save has been
// completed and "latest" moved, so a newer complete tag always exists when
// an older one is removed.
func Prune(dir string, keep int, runID string, step int64) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("prune checkpoints: keep %d, want ≥ 1", keep)
	}
	if runID == "" {
		return nil, nil
	}
	tags, err := List(dir)
	if err != nil {
		return nil, err
	}
	var mine []TagInfo
	for _, t := range tags {
		if n, ok := tagStep(t.Tag); ok && t.Complete && t.RunID == runID && n == t.Step && n <= step {
			mine = append(mine, t)
		}
	}
	var removed []string
	for i := 0; i < len(mine)-keep; i++ { // oldest first
		if mine[i].Latest {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, mine[i].Tag)); err != nil {
			return removed, fmt.Errorf("prune checkpoints: %w", err)
		}
		removed = append(removed, mine[i].Tag)
	}
	return removed, nil
}

// previousComplete is the newest complete tag older than step, or "".
func previousComplete(dir string, step int64) string {
	tags, err := List(dir)
	if err != nil {
		return ""
	}
	prev := ""
	for _, t := range tags {
		if t.Complete && t.Step < step {
			prev = t.Tag
		}
	}
	return prev
}

// HasTags reports whether the checkpoints directory dir holds any tag,
// complete or not (saves in progress, named with a leading dot, do not
// count). A missing directory holds none.
func HasTags(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("list checkpoints: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			return true, nil
		}
	}
	return false, nil
}

// MoveAside renames path to "<path>.old-<UTC time>" (with a counter if that
// exists too) and returns the new name: how a fresh start keeps an earlier
// run's checkpoints instead of deleting them.
func MoveAside(path string, now time.Time) (string, error) {
	base := path + ".old-" + now.UTC().Format("20060102-150405")
	dst := base
	for n := 2; ; n++ {
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		if n > 1000 {
			return "", fmt.Errorf("move %s aside: %s and 1000 numbered variants exist", path, base)
		}
		dst = fmt.Sprintf("%s-%d", base, n)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("move %s aside: %w", path, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	return dst, nil
}
