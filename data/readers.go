package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// Record files: JSON Lines, JSON (an array of objects, or JSON Lines under
// a .json name, as datasets' to_json writes by default), either gzipped,
// and Parquet. Parquet is read with github.com/parquet-go/parquet-go: pure
// Go (no cgo, no Arrow C++), maintained, reads every codec Hugging Face
// writes (snappy, zstd, gzip), and decodes a row of any schema into a
// map[string]any, nested lists of structs (messages) included, which is
// exactly a record; Apache Arrow's Go module is far larger for the same.

// MaxRecordBytes bounds one JSON record (a line, or an array element).
const MaxRecordBytes = 64 << 20

// recordKind says how a file holds records.
func recordKindOf(path string) (inputKind, bool) {
	name := strings.ToLower(filepath.Base(path))
	switch {
	case strings.HasSuffix(name, ".jsonl"), strings.HasSuffix(name, ".jsonl.gz"):
		return inputJSONL, true
	case strings.HasSuffix(name, ".json"), strings.HasSuffix(name, ".json.gz"):
		return inputJSON, true
	case strings.HasSuffix(name, ".parquet"):
		return inputParquet, true
	}
	return 0, false
}

func isGzip(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".gz") }

// recordReader yields the records of one file.
type recordReader struct {
	name    string
	skipBad bool
	skipped int64
}

// emitRecord receives a record with its position (line or element,
// 1-based; Parquet: row) and the bytes it took.
type emitRecord func(pos int, rec record, n int64) error

// read dispatches on kind.
func (rr *recordReader) read(f *os.File, size int64, kind inputKind, emit emitRecord) error {
	if kind == inputParquet {
		return rr.readParquet(f, size, emit)
	}
	var r io.Reader = f
	if isGzip(rr.name) {
		gz, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<16))
		if err != nil {
			return fmt.Errorf("%s: not a gzip file: %w", rr.name, err)
		}
		defer gz.Close()
		r = gz
	}
	br := bufio.NewReaderSize(r, 1<<16)
	if kind == inputJSON {
		first, err := peekNonSpace(br)
		if err != nil {
			return fmt.Errorf("read %s: %w", rr.name, err)
		}
		if first == '[' {
			return rr.readArray(br, emit)
		}
	}
	return rr.readLines(br, emit)
}

// peekNonSpace skips a BOM and whitespace and returns the next byte (0 at
// the end).
func peekNonSpace(br *bufio.Reader) (byte, error) {
	if b, err := br.Peek(3); err == nil && string(b) == "\xef\xbb\xbf" {
		br.Discard(3)
	}
	for {
		b, err := br.Peek(1)
		if errors.Is(err, io.EOF) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			br.Discard(1)
			continue
		}
		return b[0], nil
	}
}

func decodeRecord(body []byte) (record, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var rec record
	if err := d.Decode(&rec); err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	if rec == nil {
		return nil, fmt.Errorf("bad JSON: want an object, got null")
	}
	if d.More() {
		return nil, fmt.Errorf("bad JSON: more than one value on the line")
	}
	return rec, nil
}

// readLines reads JSON Lines: one object per non-blank line.
func (rr *recordReader) readLines(br *bufio.Reader, emit emitRecord) error {
	for line := 1; ; line++ {
		raw, err := readLineBounded(br, MaxRecordBytes)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s:%d: %w", rr.name, line, err)
		}
		if len(raw) == 0 && errors.Is(err, io.EOF) {
			return nil
		}
		n := int64(len(raw))
		body := raw
		if line == 1 {
			body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
		}
		body = bytes.TrimSpace(body)
		if len(body) > 0 {
			rec, perr := decodeRecord(body)
			if perr != nil {
				if !rr.skipBad {
					return fmt.Errorf("%s:%d: %w", rr.name, line, perr)
				}
				rr.skipped++
			} else if eerr := emit(line, rec, n); eerr != nil {
				return eerr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
	}
}

// readLineBounded reads through the next newline, refusing a line longer
// than limit instead of growing without bound.
func readLineBounded(br *bufio.Reader, limit int) ([]byte, error) {
	var out []byte
	for {
		frag, err := br.ReadSlice('\n')
		out = append(out, frag...)
		if len(out) > limit {
			return nil, fmt.Errorf("a line longer than %d bytes", limit)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}

// readArray reads a JSON array of objects, element by element.
func (rr *recordReader) readArray(br *bufio.Reader, emit emitRecord) error {
	d := json.NewDecoder(br)
	d.UseNumber()
	if _, err := d.Token(); err != nil {
		return fmt.Errorf("%s: %w", rr.name, err)
	}
	for i := 1; d.More(); i++ {
		start := d.InputOffset()
		var rec record
		if err := d.Decode(&rec); err != nil {
			// A broken element leaves the decoder lost: no skipping.
			return fmt.Errorf("%s: element %d: bad JSON: %w", rr.name, i, err)
		}
		if rec == nil {
			if !rr.skipBad {
				return fmt.Errorf("%s: element %d: want an object, got null", rr.name, i)
			}
			rr.skipped++
			continue
		}
		if err := emit(i, rec, d.InputOffset()-start); err != nil {
			return err
		}
	}
	if _, err := d.Token(); err != nil {
		return fmt.Errorf("%s: after the last element: %w", rr.name, err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: data after the JSON array", rr.name)
	}
	return nil
}

// readParquet reads every row of a Parquet file as a record.
func (rr *recordReader) readParquet(f *os.File, size int64, emit emitRecord) error {
	pf, err := parquet.OpenFile(f, size)
	if err != nil {
		return fmt.Errorf("%s: not a readable Parquet file: %w", rr.name, err)
	}
	rows := pf.NumRows()
	per := int64(0)
	if rows > 0 {
		per = size / rows
	}
	r := parquet.NewReader(pf)
	defer r.Close()
	for i := 1; ; i++ {
		m := map[string]any{}
		err := r.Read(&m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: row %d: %w", rr.name, i, err)
		}
		if err := emit(i, record(m), per); err != nil {
			return err
		}
	}
}

// checkArrowDir refuses a datasets save_to_disk directory with the way out.
func checkArrowDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "dataset_info.json")); err != nil {
		return nil
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.arrow")); len(m) == 0 {
		return nil
	}
	return fmt.Errorf("input %s is a Hugging Face save_to_disk directory (Arrow files), which gotrain does not read; "+
		"write it as JSON Lines or Parquet first: datasets.load_from_disk(%q).to_json(\"train.jsonl\") (or .to_parquet(\"train.parquet\"))", dir, dir)
}
