package metrics

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCSVMonitorWritesDeepSpeedFiles(t *testing.T) {
	out := t.TempDir()
	m, err := NewCSVMonitor(out, "job1")
	if err != nil {
		t.Fatal(err)
	}
	steps := []StepRecord{{Loss: 2.5, LR: 0.0006, LossScale: 65536}, {Loss: 2.25, LR: 1e-05, LossScale: 32768}}
	for i, s := range steps {
		if err := m.Write(StepEvents(s, int64(i+1)*32, true)); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Python's csv.writer ends rows with \r\n and prints floats with repr().
	want := map[string]string{
		"Train_Samples_train_loss.csv": "step,train_loss\r\n32,2.5\r\n64,2.25\r\n",
		"Train_Samples_lr.csv":         "step,lr\r\n32,0.0006\r\n64,1e-05\r\n",
		"Train_Samples_loss_scale.csv": "step,loss_scale\r\n32,65536.0\r\n64,32768.0\r\n",
	}
	entries, err := os.ReadDir(filepath.Join(out, "job1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("got %d files, want %d", len(entries), len(want))
	}
	for name, body := range want {
		got, err := os.ReadFile(filepath.Join(out, "job1", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != body {
			t.Errorf("%s = %q, want %q", name, got, body)
		}
	}

	// A resumed run appends rows without a second header.
	m, err = NewCSVMonitor(out, "job1")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Write([]MonitorEvent{{Name: MonitorLR, Value: 0.5, Samples: 96}}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	got, _ := os.ReadFile(filepath.Join(out, "job1", "Train_Samples_lr.csv"))
	if want := "step,lr\r\n32,0.0006\r\n64,1e-05\r\n96,0.5\r\n"; string(got) != want {
		t.Errorf("after resume = %q, want %q", got, want)
	}
}

func TestCSVFileNameSanitizes(t *testing.T) {
	if got := CSVFileName("Train/Eigenvalues/Model Block 1"); got != "Train_Eigenvalues_Model_Block_1.csv" {
		t.Errorf("got %q", got)
	}
}

func TestPyFloatMatchesPythonRepr(t *testing.T) {
	// Expected strings are what CPython's repr(float) prints.
	for x, want := range map[float64]string{
		0: "0.0", 1: "1.0", -2: "-2.0", 2.5: "2.5", 0.0001: "0.0001", 0.00001: "1e-05",
		1.0 / 3: "0.3333333333333333", 123456789: "123456789.0", 1e15: "1000000000000000.0",
		1e16: "1e+16", 1.5e300: "1.5e+300", 6.25e-7: "6.25e-07", math.Inf(1): "inf", math.NaN(): "nan",
	} {
		if got := pyFloat(x); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", x, got, want)
		}
	}
}

// tbEvent is an Event decoded by the test's own reader.
type tbEvent struct {
	wall        float64
	step        int64
	fileVersion string
	tag         string
	value       float32
}

func readTFRecords(t *testing.T, b []byte) [][]byte {
	t.Helper()
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	mask := func(p []byte) uint32 {
		c := crc32.Checksum(p, castagnoli)
		return ((c >> 15) | (c << 17)) + 0xa282ead8
	}
	var recs [][]byte
	for len(b) > 0 {
		if len(b) < 12 {
			t.Fatalf("%d trailing bytes", len(b))
		}
		n := binary.LittleEndian.Uint64(b[:8])
		if got := binary.LittleEndian.Uint32(b[8:12]); got != mask(b[:8]) {
			t.Fatalf("length crc %08x, want %08x", got, mask(b[:8]))
		}
		if uint64(len(b)) < 16+n {
			t.Fatalf("record of %d bytes overruns the file", n)
		}
		data := b[12 : 12+n]
		if got := binary.LittleEndian.Uint32(b[12+n : 16+n]); got != mask(data) {
			t.Fatalf("data crc %08x, want %08x", got, mask(data))
		}
		recs = append(recs, data)
		b = b[16+n:]
	}
	return recs
}

// pbFields walks one protobuf message: field number, wire type, varint
// value or fixed bits, and the bytes of length-delimited fields.
func pbFields(t *testing.T, b []byte, visit func(field, wire int, v uint64, body []byte)) {
	t.Helper()
	uvarint := func() uint64 {
		var x uint64
		for shift := 0; ; shift += 7 {
			if len(b) == 0 || shift > 63 {
				t.Fatal("bad varint")
			}
			c := b[0]
			b = b[1:]
			x |= uint64(c&0x7f) << shift
			if c < 0x80 {
				return x
			}
		}
	}
	for len(b) > 0 {
		key := uvarint()
		field, wire := int(key>>3), int(key&7)
		switch wire {
		case 0:
			visit(field, wire, uvarint(), nil)
		case 1:
			visit(field, wire, binary.LittleEndian.Uint64(b), nil)
			b = b[8:]
		case 5:
			visit(field, wire, uint64(binary.LittleEndian.Uint32(b)), nil)
			b = b[4:]
		case 2:
			n := uvarint()
			visit(field, wire, 0, b[:n])
			b = b[n:]
		default:
			t.Fatalf("wire type %d", wire)
		}
	}
}

func decodeEvent(t *testing.T, data []byte) tbEvent {
	var e tbEvent
	pbFields(t, data, func(f, w int, v uint64, body []byte) {
		switch {
		case f == 1 && w == 1:
			e.wall = math.Float64frombits(v)
		case f == 2 && w == 0:
			e.step = int64(v)
		case f == 3 && w == 2:
			e.fileVersion = string(body)
		case f == 5 && w == 2: // Summary
			pbFields(t, body, func(f, w int, _ uint64, val []byte) {
				if f != 1 || w != 2 {
					t.Fatalf("summary field %d/%d", f, w)
				}
				pbFields(t, val, func(f, w int, v uint64, s []byte) {
					switch {
					case f == 1 && w == 2:
						e.tag = string(s)
					case f == 2 && w == 5:
						e.value = math.Float32frombits(uint32(v))
					default:
						t.Fatalf("value field %d/%d", f, w)
					}
				})
			})
		default:
			t.Fatalf("event field %d wire %d", f, w)
		}
	})
	return e
}

func TestTensorBoardWritesEventFile(t *testing.T) {
	out := t.TempDir()
	before := float64(time.Now().UnixNano()) / 1e9
	tb, err := NewTensorBoard(out, "job")
	if err != nil {
		t.Fatal(err)
	}
	events := []MonitorEvent{
		{Name: MonitorTrainLoss, Value: 3.75, Samples: 64},
		{Name: MonitorLR, Value: 6e-4, Samples: 64},
		{Name: MonitorTrainLoss, Value: 3.5, Samples: 1 << 40},
	}
	if err := tb.Write(events[:2]); err != nil {
		t.Fatal(err)
	}
	if err := tb.Write(events[2:]); err != nil {
		t.Fatal(err)
	}
	path := tb.Path()
	if err := tb.Close(); err != nil {
		t.Fatal(err)
	}
	after := float64(time.Now().UnixNano()) / 1e9
	if filepath.Dir(path) != filepath.Join(out, "job") || !strings.HasPrefix(filepath.Base(path), "events.out.tfevents.") {
		t.Errorf("event file at %s", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := readTFRecords(t, b)
	if len(recs) != 1+len(events) {
		t.Fatalf("%d records, want %d", len(recs), 1+len(events))
	}
	first := decodeEvent(t, recs[0])
	if first.fileVersion != "brain.Event:2" || first.tag != "" {
		t.Errorf("first event = %+v, want the file version", first)
	}
	for i, want := range events {
		got := decodeEvent(t, recs[i+1])
		if got.tag != want.Name || got.step != want.Samples || got.value != float32(want.Value) {
			t.Errorf("event %d = %+v, want %+v", i, got, want)
		}
		if got.wall < before-1e-3 || got.wall > after+1e-3 {
			t.Errorf("event %d wall time %f outside [%f, %f]", i, got.wall, before, after)
		}
	}

	// A second writer in the same second gets its own file.
	tb2, err := NewTensorBoard(out, "job")
	if err != nil {
		t.Fatal(err)
	}
	defer tb2.Close()
	if tb2.Path() == path {
		t.Error("second writer reused the first file")
	}
}

type failingMonitor struct{ writes int }

func (f *failingMonitor) Write([]MonitorEvent) error { f.writes++; return errors.New("disk full") }
func (f *failingMonitor) Close() error               { return nil }

func TestMonitorsFanOut(t *testing.T) {
	out := t.TempDir()
	csv, err := NewCSVMonitor(out, "j")
	if err != nil {
		t.Fatal(err)
	}
	bad := &failingMonitor{}
	ms := Monitors{bad, csv}
	err = ms.Write([]MonitorEvent{{Name: MonitorTrainLoss, Value: 1, Samples: 8}})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("err = %v, want the failing backend's error", err)
	}
	if err := ms.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(out, "j", "Train_Samples_train_loss.csv"))
	if string(got) != "step,train_loss\r\n8,1.0\r\n" || bad.writes != 1 {
		t.Errorf("csv = %q, failing writes = %d: every backend must see the events", got, bad.writes)
	}
}

func TestStepEventsAndUnsupportedWarning(t *testing.T) {
	rec := StepRecord{Loss: 2, LR: 1e-3, LossScale: 1024}
	if ev := StepEvents(rec, 256, false); len(ev) != 2 || ev[0] != (MonitorEvent{MonitorTrainLoss, 2, 256}) || ev[1] != (MonitorEvent{MonitorLR, 1e-3, 256}) {
		t.Errorf("bf16/fp32 events = %+v", ev)
	}
	if ev := StepEvents(rec, 256, true); len(ev) != 3 || ev[2] != (MonitorEvent{MonitorLossScale, 1024, 256}) {
		t.Errorf("fp16 events = %+v", ev)
	}
	w := UnsupportedMonitorWarning("wandb")
	if !strings.Contains(w, "wandb") || !strings.Contains(w, "not supported (no network)") {
		t.Errorf("warning = %q", w)
	}
}
