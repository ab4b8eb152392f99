package metrics

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gotrain/gotrain/internal/atomicfile"
)

// TensorBoard is DeepSpeed's tensorboard monitor: a TensorBoard event file
// (events.out.tfevents.<unix seconds>.<host>.<pid>.<n>, as PyTorch's
// SummaryWriter names it) under output_path/job_name/, holding one scalar
// summary per event with the sample count as its step. The file is a
// sequence of TFRecords, each an Event protocol buffer encoded here by hand.
type TensorBoard struct {
	f *os.File
}

// NewTensorBoard creates output_path/job_name/ and a new event file in it,
// beginning with the file-version event TensorBoard expects. Call it on rank
// 0 only.
func NewTensorBoard(outputPath, jobName string) (*TensorBoard, error) {
	dir := filepath.Join(outputPath, jobName)
	if err := atomicfile.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("tensorboard monitor: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	t := &TensorBoard{}
	base := fmt.Sprintf("events.out.tfevents.%010d.%s.%d", time.Now().Unix(), host, os.Getpid())
	// Two writers opened within one second in one process get distinct
	// suffixes instead of sharing (and corrupting) one file.
	for n := 0; t.f == nil; n++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s.%d", base, n)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, atomicfile.FileMode)
		switch {
		case err == nil:
			t.f = f
		case errors.Is(err, fs.ErrExist) && n < 1000:
		default:
			return nil, fmt.Errorf("tensorboard monitor: %w", err)
		}
	}
	first := tfEvent(t.wallTime(), 0, "brain.Event:2", nil)
	if _, err := t.f.Write(tfRecord(first)); err != nil {
		t.f.Close()
		return nil, fmt.Errorf("tensorboard monitor %s: %w", t.f.Name(), err)
	}
	return t, nil
}

// Path is the event file being written.
func (t *TensorBoard) Path() string { return t.f.Name() }

// Write appends one scalar event per MonitorEvent, in one write so a batch
// lands whole. TensorBoard stores scalars as float32.
func (t *TensorBoard) Write(events []MonitorEvent) error {
	var buf []byte
	wall := t.wallTime()
	for _, e := range events {
		buf = append(buf, tfRecord(tfEvent(wall, e.Samples, "", tfScalarSummary(e.Name, float32(e.Value))))...)
	}
	if _, err := t.f.Write(buf); err != nil {
		return fmt.Errorf("tensorboard monitor %s: %w", t.f.Name(), err)
	}
	return nil
}

// ResumeAt writes a SessionLog START event at samples+1: TensorBoard then
// discards the points at or beyond that step that earlier event files hold
// (its purge of orphaned data), so the steps a resumed run computes again
// are not drawn twice. samples 0 (a fresh start) hides an earlier run's
// points in the same directory the same way.
func (t *TensorBoard) ResumeAt(samples int64) error {
	if _, err := t.f.Write(tfRecord(tfSessionStart(t.wallTime(), samples+1))); err != nil {
		return fmt.Errorf("tensorboard monitor %s: %w", t.f.Name(), err)
	}
	return nil
}

// SetAside is ResumeAt(0): event files are never rewritten or moved.
func (t *TensorBoard) SetAside(time.Time) ([]string, error) { return nil, t.ResumeAt(0) }

// Sync makes the events written so far durable.
func (t *TensorBoard) Sync() error { return t.f.Sync() }

// Close closes the event file.
func (t *TensorBoard) Close() error { return t.f.Close() }

func (t *TensorBoard) wallTime() float64 {
	return float64(time.Now().UnixNano()) / 1e9
}

// tfRecord frames data as a TFRecord: little-endian uint64 length, masked
// CRC-32C of those 8 bytes, the data, masked CRC-32C of the data.
func tfRecord(data []byte) []byte {
	out := make([]byte, 0, len(data)+16)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(data)))
	out = binary.LittleEndian.AppendUint32(out, maskedCRC(out[:8]))
	out = append(out, data...)
	return binary.LittleEndian.AppendUint32(out, maskedCRC(data))
}

// maskedCRC is TFRecord's CRC: CRC-32C rotated right by 15 plus a constant,
// so a CRC stored inside checksummed data does not checksum to itself.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
	return (c>>15 | c<<17) + 0xa282ead8
}

// Protocol buffer wire types.
const (
	pbVarint  = 0
	pbFixed64 = 1
	pbBytes   = 2
	pbFixed32 = 5
)

func pbTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field<<3|wire))
}

func pbBytesField(b []byte, field int, v []byte) []byte {
	b = pbTag(b, field, pbBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// tfEvent encodes tensorflow.Event: wall_time (1, double), step (2, int64),
// file_version (3, string), summary (5, Summary). Zero step and empty
// version are left out, as proto3 does.
func tfEvent(wallTime float64, step int64, fileVersion string, summary []byte) []byte {
	var b []byte
	b = pbTag(b, 1, pbFixed64)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(wallTime))
	if step != 0 {
		b = pbTag(b, 2, pbVarint)
		b = binary.AppendUvarint(b, uint64(step)) // int64: two's complement as varint
	}
	if fileVersion != "" {
		b = pbBytesField(b, 3, []byte(fileVersion))
	}
	if summary != nil {
		b = pbBytesField(b, 5, summary)
	}
	return b
}

// tfSessionStart encodes tensorflow.Event{wall_time, step, session_log (7):
// SessionLog{status (1): START = 1}}.
func tfSessionStart(wallTime float64, step int64) []byte {
	var b []byte
	b = pbTag(b, 1, pbFixed64)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(wallTime))
	b = pbTag(b, 2, pbVarint)
	b = binary.AppendUvarint(b, uint64(step))
	log := binary.AppendUvarint(pbTag(nil, 1, pbVarint), 1)
	return pbBytesField(b, 7, log)
}

// tfScalarSummary encodes tensorflow.Summary with one Value{tag (1, string),
// simple_value (2, float)}.
func tfScalarSummary(tag string, v float32) []byte {
	var val []byte
	val = pbBytesField(val, 1, []byte(tag))
	val = pbTag(val, 2, pbFixed32)
	val = binary.LittleEndian.AppendUint32(val, math.Float32bits(v))
	return pbBytesField(nil, 1, val)
}
