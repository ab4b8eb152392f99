package metrics

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gotrain/gotrain/internal/atomicfile"
)

// CSVMonitor is DeepSpeed's csv_monitor: one CSV per event name under
// output_path/job_name/, named after the event with '/' and ' ' replaced by
// '_' (Train/Samples/train_loss → Train_Samples_train_loss.csv), with the
// header "step,<last path element of the name>" and rows "samples,value".
// Values print as Python prints a float, so files match DeepSpeed's byte for
// byte. Unlike DeepSpeed, a resumed run that appends to an existing file does
// not repeat the header, and does not repeat rows either: ResumeAt drops the
// rows beyond the resumed sample count first.
type CSVMonitor struct {
	dir   string
	files map[string]*os.File
}

// NewCSVMonitor creates output_path/job_name/ and returns a monitor writing
// there. Call it on rank 0 only.
func NewCSVMonitor(outputPath, jobName string) (*CSVMonitor, error) {
	dir := filepath.Join(outputPath, jobName)
	if err := atomicfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("csv monitor: %w", err)
	}
	return &CSVMonitor{dir: dir, files: map[string]*os.File{}}, nil
}

// Dir is the directory the CSV files go to.
func (m *CSVMonitor) Dir() string { return m.dir }

// CSVFileName is the file csv_monitor writes an event name to.
func CSVFileName(name string) string {
	return strings.NewReplacer("/", "_", " ", "_").Replace(name) + ".csv"
}

// Write appends one row per event, opening (and heading) each file the first
// time its name appears.
func (m *CSVMonitor) Write(events []MonitorEvent) error {
	for _, e := range events {
		f, err := m.file(e.Name)
		if err != nil {
			return err
		}
		row := strconv.FormatInt(e.Samples, 10) + "," + pyFloat(e.Value) + "\r\n"
		if _, err := f.WriteString(row); err != nil {
			return fmt.Errorf("csv monitor %s: %w", f.Name(), err)
		}
	}
	return nil
}

func (m *CSVMonitor) file(name string) (*os.File, error) {
	if f, ok := m.files[name]; ok {
		return f, nil
	}
	path := filepath.Join(m.dir, CSVFileName(name))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, atomicfile.FileMode)
	if err != nil {
		return nil, fmt.Errorf("csv monitor: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("csv monitor: %w", err)
	}
	if st.Size() == 0 {
		header := name
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			header = name[i+1:]
		}
		if _, err := f.WriteString("step," + header + "\r\n"); err != nil {
			f.Close()
			return nil, fmt.Errorf("csv monitor %s: %w", path, err)
		}
	}
	m.files[name] = f
	return f, nil
}

// monitorFiles are the files this monitor writes (the events StepEvents
// makes); a resume or a fresh start touches these and no other file in
// the job's directory.
func (m *CSVMonitor) monitorFiles() []string {
	var out []string
	for _, name := range []string{MonitorTrainLoss, MonitorLR, MonitorLossScale} {
		out = append(out, filepath.Join(m.dir, CSVFileName(name)))
	}
	return out
}

// ResumeAt drops every row beyond samples (the resumed checkpoint's sample
// count) from the monitor's files, rewriting each through a temporary file.
func (m *CSVMonitor) ResumeAt(samples int64) error {
	if err := m.Close(); err != nil {
		return fmt.Errorf("csv monitor: %w", err)
	}
	for _, path := range m.monitorFiles() {
		_, err := rewriteLines(path, func(line []byte) bool {
			x, _, found := strings.Cut(string(line), ",")
			n, err := strconv.ParseInt(x, 10, 64)
			return !found || err != nil || n <= samples // headers stay
		})
		if err != nil {
			return fmt.Errorf("csv monitor: %w", err)
		}
	}
	return nil
}

// SetAside moves an earlier run's files aside (see metrics.SetAside) before
// a fresh start writes new ones, and returns their new names.
func (m *CSVMonitor) SetAside(now time.Time) ([]string, error) {
	if err := m.Close(); err != nil {
		return nil, fmt.Errorf("csv monitor: %w", err)
	}
	var moved []string
	for _, path := range m.monitorFiles() {
		dst, ok, err := SetAside(path, now)
		if err != nil {
			return moved, fmt.Errorf("csv monitor: %w", err)
		}
		if ok {
			moved = append(moved, dst)
		}
	}
	return moved, nil
}

// Sync makes the rows written so far durable.
func (m *CSVMonitor) Sync() error {
	var errs []error
	for _, f := range m.files {
		errs = append(errs, f.Sync())
	}
	return errors.Join(errs...)
}

// Close closes every file.
func (m *CSVMonitor) Close() error {
	var errs []error
	for _, f := range m.files {
		errs = append(errs, f.Close())
	}
	m.files = map[string]*os.File{}
	return errors.Join(errs...)
}

// pyFloat formats x as Python's repr(float): shortest round-trip digits,
// positional for exponents in [-4, 16) with at least one decimal, otherwise
// scientific with a two-digit minimum exponent.
func pyFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	case x == 0:
		if math.Signbit(x) {
			return "-0.0"
		}
		return "0.0"
	}
	sci := strconv.FormatFloat(x, 'e', -1, 64)
	exp, err := strconv.Atoi(sci[strings.IndexByte(sci, 'e')+1:])
	if err != nil || exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}
