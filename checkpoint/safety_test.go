package checkpoint

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/model"
)

// TestMetaChecksumRefusesEditedStep: meta.json carries its own checksum; a
// hand-edited step is refused with an error naming the file, where the old
// reader accepted "step": 3000000000000.
func TestMetaChecksumRefusesEditedStep(t *testing.T) {
	cfg := testConfig()
	dir := t.TempDir()
	save(t, dir, model.NewLayout(cfg), sourceState(cfg, 1), 20, 1, 0)
	path := filepath.Join(dir, "global_step20", MetaFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(b, []byte(`"step": 20,`), []byte(`"step": 3000000000000,`), 1)
	if bytes.Equal(edited, b) {
		t.Fatalf("meta.json has no \"step\": 20 line:\n%s", b)
	}
	if err := os.WriteFile(path, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, "")
	if err == nil {
		r.Close()
		t.Fatalf("opened a meta.json with an edited step (step %d)", r.Meta().Step)
	}
	wantMentions(t, err, path, "checksum")
	infos, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Complete || !strings.Contains(infos[0].Problem, "checksum") {
		t.Errorf("List: %+v", infos)
	}
}

// A version 1 meta.json (no checksum, no run id) still opens, with a
// warning that it could not be checked.
func TestLegacyMetaOpensWithWarning(t *testing.T) {
	cfg := testConfig()
	dir := t.TempDir()
	save(t, dir, model.NewLayout(cfg), sourceState(cfg, 1), 10, 1, 0)
	path := filepath.Join(dir, "global_step10", MetaFile)
	b, _ := os.ReadFile(path)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "meta_sha256")
	delete(doc, "run_id")
	doc["format_version"] = 1
	b, _ = json.MarshalIndent(doc, "", "  ")
	os.WriteFile(path, b, 0o644)
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		t.Fatal(err)
	}
	if w := r.Warnings(); len(w) != 1 || !strings.Contains(w[0], "checksum") {
		t.Errorf("warnings %q", w)
	}
	// A version 2 file without its checksum is not legacy: refused.
	doc["format_version"] = 2
	b, _ = json.MarshalIndent(doc, "", "  ")
	os.WriteFile(path, b, 0o644)
	if r2, err := Open(dir, ""); err == nil {
		r2.Close()
		t.Error("opened a version 2 meta.json without its checksum")
	}
}

// saveRun saves one tag of lineage runID through the writer, pruning as a
// run with save_total_limit keep would.
func saveRun(t *testing.T, dir string, step int64, runID string, keep int) {
	t.Helper()
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	src := sourceState(cfg, uint64(step))
	w, err := NewTagWriter(dir, TagName(step), lay, AllKinds(), WriterOptions{Rank: 0, World: 1, SaveTotalLimit: keep})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range AllKinds() {
		if err := w.WriteRange(k, 0, src[k]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(Metadata{Step: step, Model: ModelConfigOf(cfg), RunID: runID}); err != nil {
		t.Fatal(err)
	}
}

// TestPruneKeepsOtherLineagesAndHigherSteps: save_total_limit deletes only
// older tags of the saving run's own lineage, never an earlier run's tags
// and never a tag beyond the step just saved.
func TestPruneKeepsOtherLineagesAndHigherSteps(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []int64{10, 20, 30} {
		saveRun(t, dir, s, "first", 0)
	}
	// A second lineage in the same directory (a run resumed from another
	// run's checkpoint) with a limit of 1.
	for _, s := range []int64{1, 2, 3} {
		saveRun(t, dir, s, "second", 1)
	}
	if got := tagNames(t, dir); !slices.Equal(got, []string{"global_step3", "global_step10", "global_step20", "global_step30"}) {
		t.Errorf("after the second lineage's saves: %v", got)
	}
	// The first lineage resumed from step 10: its saves at 11 and 12 prune
	// 10 and 11, but 20 and 30 lie beyond the step just saved.
	saveRun(t, dir, 11, "first", 1)
	saveRun(t, dir, 12, "first", 1)
	if got := tagNames(t, dir); !slices.Equal(got, []string{"global_step3", "global_step12", "global_step20", "global_step30"}) {
		t.Errorf("after resuming the first lineage at 10: %v", got)
	}
	if got := readLatestFile(t, dir); got != "global_step12" {
		t.Errorf("latest = %s", got)
	}
}

// TestOpenNewestVerified: without "latest", the newest tag that verifies is
// chosen and the damaged newer ones are named; with none, every tag is
// listed with its problem.
func TestOpenNewestVerified(t *testing.T) {
	dir, path, off := damaged(t) // 10 good, 20 with a flipped byte
	f, _ := os.OpenFile(path, os.O_RDWR, 0)
	f.WriteAt([]byte{0xff, 0xff}, off)
	f.Close()
	os.Mkdir(filepath.Join(dir, "global_step30"), 0o755) // interrupted before meta.json
	os.Remove(filepath.Join(dir, LatestFile))
	r, skipped, err := OpenNewestVerified(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Tag() != "global_step10" || len(skipped) != 2 || !strings.HasPrefix(skipped[0], "global_step30: incomplete") ||
		!strings.Contains(skipped[1], "corrupted") {
		t.Errorf("chose %s, skipped %q", r.Tag(), skipped)
	}
	r.Close()
	os.Remove(filepath.Join(dir, "global_step10", Params.FileName()))
	_, _, err = OpenNewestVerified(dir)
	wantMentions(t, err, "no checkpoint", "verifies", "global_step10", "global_step20", "global_step30")
}

// Saving a step that already exists replaces the tag in one exchange: the
// tag and "latest" stay readable, and the content is the new save's.
func TestResaveSameStepReplacesTag(t *testing.T) {
	dir := t.TempDir()
	saveRun(t, dir, 10, "a", 0)
	saveRun(t, dir, 10, "b", 0)
	r, err := Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Verify(); err != nil || r.Meta().RunID != "b" {
		t.Errorf("after re-saving: run %q, verify %v", r.Meta().RunID, err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

func TestLockRefusesSecondRun(t *testing.T) {
	dir := t.TempDir()
	l, err := LockOutputDir(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	_, err = LockOutputDir(dir, nil)
	wantMentions(t, err, dir, "in use", "pid "+strconv.Itoa(os.Getpid()), host, "started")
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, LockFile)); !os.IsNotExist(err) {
		t.Errorf("lock file left after Release: %v", err)
	}
	l, err = LockOutputDir(dir, nil)
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	l.Release()
}

// A lock file left by a dead process on this host is taken over, with a
// note naming it; one from another host is refused with the fix.
func TestLockStale(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1) to get a dead pid from")
	}
	dead := cmd.Process.Pid
	host, _ := os.Hostname()
	write := func(h lockHolder) {
		b, _ := json.Marshal(h)
		os.WriteFile(filepath.Join(dir, LockFile), b, 0o644)
	}
	write(lockHolder{PID: dead, Host: host, Started: time.Now()})
	var notes []string
	l, err := LockOutputDir(dir, func(s string) { notes = append(notes, s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "stale") || !strings.Contains(notes[0], "pid "+strconv.Itoa(dead)) {
		t.Errorf("notes %q", notes)
	}
	l.Release()
	write(lockHolder{PID: 4242, Host: "elsewhere.example", Started: time.Now()})
	_, err = LockOutputDir(dir, nil)
	wantMentions(t, err, "pid 4242", "elsewhere.example", "remove "+filepath.Join(dir, LockFile))
}
