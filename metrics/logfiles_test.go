package metrics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTrimLogDropsStepsBeyondTheResume(t *testing.T) {
	body := `{"step":0,"val_loss":5,"val_batches":2}
{"step":1,"loss":4.5}
{"step":2,"loss":4.25}
{"step":2,"val_loss":4.3,"val_batches":2}
{"note":"kept: no step"}
{"step":3,"loss":4.0}
{"step":4,"loss":3.9}
{"step":5,"loss":3.`
	path := writeFile(t, "metrics.jsonl", body)
	dropped, err := TrimLog(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"step":0,"val_loss":5,"val_batches":2}
{"step":1,"loss":4.5}
{"step":2,"loss":4.25}
{"step":2,"val_loss":4.3,"val_batches":2}
{"note":"kept: no step"}
`
	got, _ := os.ReadFile(path)
	if string(got) != want || dropped != 3 {
		t.Errorf("dropped %d, file:\n%s\nwant:\n%s", dropped, got, want)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	// Nothing beyond: the file is not rewritten.
	st0, _ := os.Stat(path)
	if n, err := TrimLog(path, 10); n != 0 || err != nil {
		t.Errorf("second trim: %d, %v", n, err)
	}
	if st1, _ := os.Stat(path); !os.SameFile(st0, st1) {
		t.Error("a trim with nothing to drop replaced the file")
	}
	if n, err := TrimLog(filepath.Join(t.TempDir(), "none"), 1); n != 0 || err != nil {
		t.Errorf("missing file: %d, %v", n, err)
	}
}

func TestSetAsideMovesOnlyNonEmptyFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.jsonl")
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	if _, moved, err := SetAside(path, now); moved || err != nil {
		t.Errorf("missing file: moved %v, %v", moved, err)
	}
	os.WriteFile(path, []byte(`{"step":1}`+"\n"), 0o644)
	dst, moved, err := SetAside(path, now)
	if err != nil || !moved || dst != path+".old-20250304-050607" {
		t.Fatalf("SetAside = %q, %v, %v", dst, moved, err)
	}
	os.WriteFile(path, []byte(`{"step":1}`+"\n"), 0o644)
	if dst2, _, _ := SetAside(path, now); dst2 != dst+"-2" {
		t.Errorf("second move went to %q", dst2)
	}
}

func TestCSVMonitorResumeDropsReplayedRows(t *testing.T) {
	out := t.TempDir()
	m, _ := NewCSVMonitor(out, "job")
	for s := int64(1); s <= 5; s++ {
		m.Write(StepEvents(StepRecord{Loss: float64(s), LR: 0.1}, 8*s, false))
	}
	m.Close()
	m, _ = NewCSVMonitor(out, "job")
	if err := m.ResumeAt(16); err != nil {
		t.Fatal(err)
	}
	m.Write(StepEvents(StepRecord{Loss: 9, LR: 0.2}, 24, false))
	if err := m.Sync(); err != nil {
		t.Fatal(err)
	}
	m.Close()
	got, _ := os.ReadFile(filepath.Join(out, "job", "Train_Samples_train_loss.csv"))
	if want := "step,train_loss\r\n8,1.0\r\n16,2.0\r\n24,9.0\r\n"; string(got) != want {
		t.Errorf("after resume: %q, want %q", got, want)
	}
	moved, err := m.SetAside(time.Unix(0, 0))
	if err != nil || len(moved) != 2 || !strings.Contains(moved[0], ".csv.old-") {
		t.Errorf("SetAside moved %q, %v", moved, err)
	}
}

// ResumeAt writes a SessionLog START event one past the resumed sample
// count, the marker TensorBoard purges replayed points by.
func TestTensorBoardResumeWritesSessionStart(t *testing.T) {
	tb, err := NewTensorBoard(t.TempDir(), "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := tb.ResumeAt(640); err != nil {
		t.Fatal(err)
	}
	tb.Close()
	b, _ := os.ReadFile(tb.Path())
	recs := readTFRecords(t, b)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	var step int64
	status := -1
	pbFields(t, recs[1], func(f, w int, v uint64, body []byte) {
		switch {
		case f == 2 && w == 0:
			step = int64(v)
		case f == 7 && w == 2:
			pbFields(t, body, func(f, w int, v uint64, _ []byte) {
				if f == 1 && w == 0 {
					status = int(v)
				}
			})
		}
	})
	if step != 641 || status != 1 {
		t.Errorf("event step %d session status %d, want 641 and START (1)", step, status)
	}
}
