package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// The log files (metrics.jsonl, csv_monitor's CSVs, TensorBoard's event
// file) are append-only while a run lasts: created 0644, appended line by
// line, fsynced at every checkpoint (Sync), so what a checkpoint covers is
// durable with it. When a run starts they are put in order for it:
//   - a resume from step S drops the records beyond S, which the run is
//     about to compute again, by rewriting the file through a temporary
//     file and a rename (TrimLog, CSVMonitor.ResumeAt); TensorBoard event
//     files cannot be rewritten in place, so a SessionLog START event at the
//     resumed sample count tells TensorBoard to discard the replayed points;
//   - a fresh start moves a non-empty file from an earlier run aside to
//     "<name>.old-<UTC time>" (SetAside) rather than mixing two runs.

// TrimLog rewrites the metrics.jsonl at path without the records whose
// "step" is beyond step (step and eval records alike) and without a final
// line cut short by a kill; lines without a step are kept. It returns how
// many records it dropped. A missing file is not an error, and a file with
// nothing to drop is left untouched.
func TrimLog(path string, step int) (dropped int, err error) {
	return rewriteLines(path, func(line []byte) bool {
		var rec struct {
			Step *json.Number `json:"step"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Step == nil {
			return true
		}
		n, err := rec.Step.Int64()
		return err != nil || n <= int64(step)
	})
}

// rewriteLines streams path into a temporary file keeping the complete
// lines keep accepts, and renames it over path if any line was dropped.
func rewriteLines(path string, keep func(line []byte) bool) (dropped int, err error) {
	in, _, err := regularfile.Open("metrics log", path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := atomicfile.Create(path)
	if err != nil {
		return 0, err
	}
	defer out.Abort()
	w := bufio.NewWriter(out)
	r := bufio.NewReader(in)
	for {
		line, rerr := r.ReadBytes('\n')
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, fmt.Errorf("rewrite %s: %w", path, rerr)
		}
		if rerr != nil { // no newline: the tail a killed run cut short
			if len(bytes.TrimSpace(line)) > 0 {
				dropped++
			}
			break
		}
		if keep(bytes.TrimSpace(line)) {
			if _, err := w.Write(line); err != nil {
				return 0, fmt.Errorf("rewrite %s: %w", path, err)
			}
		} else {
			dropped++
		}
	}
	if dropped == 0 {
		return 0, nil
	}
	if err := w.Flush(); err != nil {
		return 0, fmt.Errorf("rewrite %s: %w", path, err)
	}
	return dropped, out.Commit()
}

// SetAside renames a non-empty file at path to "<path>.old-<UTC time>"
// (numbered if that exists) and returns the new name; moved is false when
// there was nothing to move.
func SetAside(path string, now time.Time) (newPath string, moved bool, err error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && st.Size() == 0) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("move %s aside: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return "", false, fmt.Errorf("%s is a directory or device, not a log file; move it away, gotrain writes its log there", path)
	}
	base := path + ".old-" + now.UTC().Format("20060102-150405")
	dst := base
	for n := 2; ; n++ {
		if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
			break
		}
		dst = base + "-" + strconv.Itoa(n)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", false, fmt.Errorf("move %s aside: %w", path, err)
	}
	return dst, true, nil
}
