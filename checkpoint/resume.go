package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ResumeOptions say where a run starts.
type ResumeOptions struct {
	OutputDir string // the run's --output-dir; its checkpoints are under Dir(OutputDir)
	Resume    string // "" or "never", "auto", or a checkpoints or tag directory
	Overwrite bool   // a fresh start moves an earlier run's checkpoints aside
	// MoveAside is set on the one process of a job that moves them (rank
	// 0); the others only decide alike.
	MoveAside bool
	// Log receives the decisions worth telling the user (nil: none).
	Log func(format string, args ...any)
}

// OpenForResume decides where a run starts, from --resume and what the
// output directory holds, and opens the checkpoint to continue from (nil:
// a fresh start).
//
//   - "" or "never": a fresh start. A checkpoints directory with tags is
//     refused (it would mix two runs and let retention delete the earlier
//     one), unless Overwrite moves it aside.
//   - "auto": the tag "latest" names; without "latest", the newest tag that
//     verifies; with no tags at all, a fresh start (a requeued job's first
//     submission).
//   - anything else: a checkpoints directory (its "latest") or one tag
//     directory.
func OpenForResume(o ResumeOptions) (*Reader, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	dir := Dir(o.OutputDir)
	if o.Overwrite && o.Resume != "" && o.Resume != "never" {
		return nil, fmt.Errorf("--overwrite starts afresh and cannot be combined with --resume %s; drop one of them", o.Resume)
	}
	switch o.Resume {
	case "", "never":
		if o.OutputDir == "" {
			return nil, nil
		}
		has, err := HasTags(dir)
		if err != nil || !has {
			return nil, err
		}
		if !o.Overwrite {
			return nil, fmt.Errorf("%s already holds checkpoints (%s); pass --resume auto to continue that run, or --overwrite to start afresh (the old checkpoints are moved aside, not deleted)",
				dir, tagSummary(dir))
		}
		if o.MoveAside {
			moved, err := MoveAside(dir, time.Now())
			if err != nil {
				return nil, fmt.Errorf("--overwrite: %w", err)
			}
			o.Log("--overwrite: moved the previous checkpoints to %s\n", moved)
		}
		return nil, nil
	case "auto":
		if o.OutputDir == "" {
			return nil, fmt.Errorf("--resume auto needs --output-dir (its checkpoints directory is where it looks)")
		}
		has, err := HasTags(dir)
		if err != nil {
			return nil, err
		}
		if !has {
			o.Log("--resume auto: no checkpoint in %s yet; starting at step 1\n", dir)
			return nil, nil
		}
		// A tag "latest" names is resumed from, or refused if it is damaged
		// (the error names the previous complete tag). Without a usable
		// "latest" — missing, unreadable, or naming a tag that is not there
		// (a save cut between renames on a file system without exchange) —
		// the newest tag that verifies is taken, and the output says so.
		why := fmt.Sprintf("%s has no %q file", dir, LatestFile)
		switch tag, ok, err := Latest(dir); {
		case err != nil:
			why = err.Error()
		case ok:
			if _, err := os.Stat(filepath.Join(dir, tag)); err == nil {
				return Open(dir, "")
			}
			why = fmt.Sprintf("%s names %s, which is not in %s", LatestFile, tag, dir)
		}
		ck, skipped, err := OpenNewestVerified(dir)
		if err != nil {
			return nil, fmt.Errorf("%s, and %w; pass --resume with a tag directory to choose, or --overwrite to start afresh", why, err)
		}
		o.Log("--resume auto: %s; resuming from %s, the newest checkpoint that verifies\n", why, ck.Tag())
		for _, s := range skipped {
			o.Log("  skipped %s\n", s)
		}
		return ck, nil
	}
	if st, err := os.Stat(o.Resume); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: pass auto, never, a checkpoints directory (e.g. out/checkpoints) or a tag directory (e.g. out/checkpoints/%s)",
			o.Resume, TagName(100))
	}
	if _, err := os.Stat(filepath.Join(o.Resume, MetaFile)); err == nil {
		return Open(filepath.Dir(o.Resume), filepath.Base(o.Resume))
	}
	return Open(o.Resume, "")
}

// tagSummary names the tags in a checkpoints directory for a message.
func tagSummary(dir string) string {
	tags, err := List(dir)
	if err != nil || len(tags) == 0 {
		return "tags of an earlier run"
	}
	names := make([]string, 0, len(tags))
	for _, t := range tags {
		names = append(names, t.Tag)
	}
	if len(names) > 6 {
		names = append(names[:2], fmt.Sprintf("… %d more …", len(names)-4), names[len(names)-2], names[len(names)-1])
	}
	return strings.Join(names, ", ")
}

// TagsAfter lists the tags in dir beyond step, oldest first.
func TagsAfter(dir string, step int64) []string {
	tags, err := List(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, t := range tags {
		if t.Step > step {
			out = append(out, t.Tag)
		}
	}
	return out
}
