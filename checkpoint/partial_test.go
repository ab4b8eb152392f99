package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gotrain/gotrain/model"
)

// limitFileSize makes every write at or past n bytes into a regular file
// fail with EFBIG (the Go runtime ignores SIGXFSZ), as a full disk fails a
// write part-way, until the returned func restores the limit. It is
// process-wide: the caller writes no other files meanwhile.
func limitFileSize(t *testing.T, n uint64) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore = func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(restore)
	return restore
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestFailedFinishRemovesPartialTag: a meta.json write that fails (the
// disk filled up after the tensors went in) must not leave
// ".global_step3.tmp" holding every tensor until the same tag is saved
// again: Finish removes it, says so, and leaves the previous tag and
// "latest" alone.
func TestFailedFinishRemovesPartialTag(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	src := sourceState(cfg, 1)
	dir := t.TempDir()
	save(t, dir, lay, src, 2, 1, 0)
	w, err := NewTagWriter(dir, TagName(3), lay, AllKinds(), WriterOptions{Rank: 0, World: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range AllKinds() {
		if err := w.WriteRange(k, 0, src[k]); err != nil {
			t.Fatal(err)
		}
	}
	restore := limitFileSize(t, 16) // meta.json is kilobytes
	err = w.Finish(Metadata{Step: 3, RunID: "lineage-a"})
	restore()
	if err == nil || !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("Finish with meta.json unwritable: %v, want the write error", err)
	}
	tmp := filepath.Join(dir, tmpName(TagName(3)))
	if !strings.Contains(err.Error(), tmp+" was removed") {
		t.Errorf("error %q does not say the partial tag was removed", err)
	}
	if _, serr := os.Lstat(tmp); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("%s is still there after the failed save (%v); entries: %v", tmp, serr, entries(t, dir))
	}
	if tag, _, _ := Latest(dir); tag != TagName(2) {
		t.Errorf("latest = %q, want the previous %s", tag, TagName(2))
	}
}

// TestFailedWriteRemovesPartialTag: a tensor write that fails part-way
// (ENOSPC in the probe; EFBIG here), then Abort: nothing of the tag is
// left, and the error says so.
func TestFailedWriteRemovesPartialTag(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	src := sourceState(cfg, 1)
	dir := t.TempDir()
	w, err := NewTagWriter(dir, TagName(1), lay, AllKinds(), WriterOptions{Rank: 0, World: 1})
	if err != nil {
		t.Fatal(err)
	}
	restore := limitFileSize(t, uint64(len(fileHeader(lay, Params)))+64)
	werr := w.WriteRange(Params, 0, src[Params])
	restore()
	if !errors.Is(werr, syscall.EFBIG) {
		t.Fatalf("WriteRange past the file size limit: %v, want EFBIG", werr)
	}
	err = w.Abort(werr)
	tmp := filepath.Join(dir, tmpName(TagName(1)))
	if !errors.Is(err, syscall.EFBIG) || !strings.Contains(err.Error(), tmp+" was removed") {
		t.Errorf("Abort: %v, want the write error and that %s was removed", err, tmp)
	}
	if names := entries(t, dir); len(names) != 0 {
		t.Errorf("after the failed save the checkpoints directory holds %v, want nothing", names)
	}
}

// TestNewTagWriterRemovesWhatItCreatedOnFailure: rank 0 creating the
// files at full size fails on the second file (EFBIG, as ENOSPC would);
// the files it had made are not left behind.
func TestNewTagWriterRemovesWhatItCreatedOnFailure(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	dir := t.TempDir()
	restore := limitFileSize(t, uint64(len(fileHeader(lay, Params)))+8)
	_, err := NewTagWriter(dir, TagName(1), lay, AllKinds(), WriterOptions{Rank: 0, World: 1})
	restore()
	if !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("NewTagWriter past the file size limit: %v, want EFBIG", err)
	}
	if names := entries(t, dir); len(names) != 0 {
		t.Errorf("after the failed start the checkpoints directory holds %v, want nothing", names)
	}
}

// TestSweepPartialRemovesLeftoversOfDeadSaves: the temporary directories
// of saves that died are removed with the disk space they held; a complete
// tag, "latest", other files and a finished temporary directory whose tag
// is missing (a rename the kill interrupted) stay.
func TestSweepPartialRemovesLeftoversOfDeadSaves(t *testing.T) {
	cfg := testConfig()
	lay := model.NewLayout(cfg)
	src := sourceState(cfg, 1)
	dir := t.TempDir()
	save(t, dir, lay, src, 2, 1, 0)
	mk := func(name string, files map[string]int) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, n := range files {
			if err := os.WriteFile(filepath.Join(p, f), make([]byte, n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	dead4 := mk(".global_step4.tmp", map[string]int{"params.safetensors": 300 << 10, "exp_avg.safetensors": 100 << 10})
	dead2 := mk(".global_step2.tmp", map[string]int{"params.safetensors": 50 << 10})
	done6 := mk(".global_step6.tmp", map[string]int{"params.safetensors": 10, MetaFile: 10})
	other := mk(".notes.tmpdir", map[string]int{"x": 1})

	swept, err := SweepPartial(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Swept{}
	for _, s := range swept {
		got[s.Path] = s
	}
	for path, minBytes := range map[string]int64{dead4: 400 << 10, dead2: 50 << 10} {
		s, ok := got[path]
		if !ok || s.Kept != "" {
			t.Errorf("%s: swept %+v, want it removed", path, s)
		}
		if s.Bytes < minBytes {
			t.Errorf("%s: reported %d bytes freed, want at least the %d its files held", path, s.Bytes, minBytes)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists", path)
		}
	}
	if s, ok := got[done6]; !ok || !strings.Contains(s.Kept, "complete checkpoint") {
		t.Errorf("%s: swept %+v, want it kept and reported as a complete checkpoint", done6, s)
	}
	for _, keep := range []string{done6, other, filepath.Join(dir, TagName(2)), filepath.Join(dir, LatestFile)} {
		if _, err := os.Lstat(keep); err != nil {
			t.Errorf("%s was removed: %v", keep, err)
		}
	}
	if _, err := Open(dir, ""); err != nil {
		t.Errorf("the complete tag no longer opens: %v", err)
	}
}
