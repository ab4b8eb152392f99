package metrics

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CSVMonitor is DeepSpeed's csv_monitor: one CSV per event name under
// output_path/job_name/, named after the event with '/' and ' ' replaced by
// '_' (Train/Samples/train_loss → Train_Samples_train_loss.csv), with the
// header "step,<last path element of the name>" and rows "samples,value".
// Values print as Python prints a float, so files match DeepSpeed's byte for
// byte. Unlike DeepSpeed, a resumed run that appends to an existing file does
// not repeat the header.
type CSVMonitor struct {
	dir   string
	files map[string]*os.File
}

// NewCSVMonitor creates output_path/job_name/ and returns a monitor writing
// there. Call it on rank 0 only.
func NewCSVMonitor(outputPath, jobName string) (*CSVMonitor, error) {
	dir := filepath.Join(outputPath, jobName)
	if err := os.MkdirAll(dir, 0o755); err != nil {
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
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
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
