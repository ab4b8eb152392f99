package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// TagInfo describes one tag directory for `gotrain checkpoint inspect`.
type TagInfo struct {
	Tag       string
	Step      int64 // from meta.json, else from the name; -1 when neither says
	WorldSize int   // 0 when incomplete
	Stage     int
	Bytes     int64 // sum of the directory's file sizes
	Complete  bool  // meta.json is present and parses
	Latest    bool  // "latest" names this tag
}

// List describes every tag in the checkpoints directory dir, oldest step
// first. Names starting with '.' (saves in progress or interrupted) are not
// tags and are skipped.
func List(dir string) ([]TagInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	latest, _, err := readLatest(dir)
	if err != nil {
		return nil, err
	}
	var out []TagInfo
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info := TagInfo{Tag: e.Name(), Step: -1, Latest: e.Name() == latest}
		if n, ok := tagStep(e.Name()); ok {
			info.Step = n
		}
		if m, err := readMeta(filepath.Join(dir, e.Name())); err == nil {
			info.Complete = true
			info.Step, info.WorldSize, info.Stage = m.Step, m.WorldSize, m.Stage
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

// readMeta reads a tag directory's meta.json.
func readMeta(tagDir string) (Metadata, error) {
	b, err := os.ReadFile(filepath.Join(tagDir, MetaFile))
	if err != nil {
		return Metadata{}, err
	}
	var m Metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return Metadata{}, fmt.Errorf("%s: %w", filepath.Join(tagDir, MetaFile), err)
	}
	return m, nil
}

// Prune deletes complete global_step<N> tags beyond the keep newest (by
// step), never the one "latest" names, and returns the removed tags. Tags
// with other names and incomplete directories are left alone. It runs only
// after a save has been completed and "latest" moved, so a newer complete
// tag always exists when an older one is removed.
func Prune(dir string, keep int) ([]string, error) {
	if keep < 1 {
		return nil, fmt.Errorf("prune checkpoints: keep %d, want ≥ 1", keep)
	}
	tags, err := List(dir)
	if err != nil {
		return nil, err
	}
	var steps []TagInfo
	for _, t := range tags {
		if _, ok := tagStep(t.Tag); ok && t.Complete {
			steps = append(steps, t)
		}
	}
	var removed []string
	for i := 0; i < len(steps)-keep; i++ { // oldest first
		if steps[i].Latest {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, steps[i].Tag)); err != nil {
			return removed, fmt.Errorf("prune checkpoints: %w", err)
		}
		removed = append(removed, steps[i].Tag)
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
