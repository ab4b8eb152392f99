package data

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

type lineRecord struct {
	line int
	text any
	n    int64
}

// readRecordLines reads s as JSON Lines named docs.jsonl and returns each
// record's line, "text" value and size.
func readRecordLines(t testing.TB, skip bool, s string) ([]lineRecord, int64, error) {
	t.Helper()
	rr := &recordReader{name: "docs.jsonl", skipBad: skip}
	var recs []lineRecord
	err := rr.readLines(bufio.NewReader(strings.NewReader(s)), func(line int, rec record, n int64) error {
		recs = append(recs, lineRecord{line, rec["text"], n})
		return nil
	})
	return recs, rr.skipped, err
}

// JSON Lines: a leading byte-order mark is dropped, blank lines are no
// records but count as lines, CRLF endings and a missing final newline are
// fine, and each record reports its 1-based line and its bytes with the
// newline.
func TestRecordLines(t *testing.T) {
	lines := []string{
		"\xef\xbb\xbf{\"text\": \"first\", \"id\": 1}\r\n",
		"\n",
		"   \n",
		"{\"id\": 2, \"text\": \"second\\nline \\u00e9\"}\n",
		"{\"text\": \"\"}\n",
		"{\"text\": \"no newline at end\"}",
	}
	recs, skipped, err := readRecordLines(t, false, strings.Join(lines, ""))
	if err != nil {
		t.Fatal(err)
	}
	size := func(i int) int64 { return int64(len(lines[i])) }
	want := []lineRecord{{1, "first", size(0)}, {4, "second\nline é", size(3)}, {5, "", size(4)}, {6, "no newline at end", size(5)}}
	if len(recs) != len(want) || skipped != 0 {
		t.Fatalf("records %+v skipped %d", recs, skipped)
	}
	for i, r := range recs {
		if r != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, r, want[i])
		}
	}
}

// A bad line is an error naming file:line, or, when skipping, is counted
// and the good lines still come through.
func TestRecordLinesErrors(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n", "docs.jsonl:2: bad JSON"},
		{"{\"text\": \"ok\"}\n\n{\"text\": 1} {\"text\": 2}\n", "docs.jsonl:3: bad JSON: more than one value"},
		{"null\n", "docs.jsonl:1: bad JSON"},
		{"[1, 2]\n", "docs.jsonl:1: bad JSON"},
	} {
		_, _, err := readRecordLines(t, false, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("input %q: error %v, want %q", tc.in, err, tc.want)
		}
		recs, skipped, err := readRecordLines(t, true, tc.in)
		if err != nil || skipped != 1 {
			t.Errorf("input %q with skipping: %v, skipped %d", tc.in, err, skipped)
		}
		for _, r := range recs {
			if r.text != "ok" {
				t.Errorf("input %q with skipping yielded %v", tc.in, r.text)
			}
		}
	}
}

// FuzzRecordLines: for any bytes, the skipping reader never fails, lines
// rise, the records' bytes stay within the input, and the strict reader
// fails, naming file:line, exactly when the skipping one skipped a line.
func FuzzRecordLines(f *testing.F) {
	f.Add([]byte("{\"text\": \"a\"}\n{\"text\": 1}\n"))
	f.Add([]byte("\xef\xbb\xbf{\"text\":\"\\ud800\"}\r\n\n"))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rr := &recordReader{name: "f.jsonl", skipBad: true}
		last := 0
		var total int64
		err := rr.readLines(bufio.NewReader(bytes.NewReader(b)), func(line int, _ record, n int64) error {
			if line <= last {
				t.Fatalf("line %d after line %d", line, last)
			}
			last = line
			total += n
			return nil
		})
		if err != nil {
			t.Fatalf("skipping reader failed: %v", err)
		}
		if total > int64(len(b)) {
			t.Fatalf("records cover %d bytes of %d", total, len(b))
		}
		strict := &recordReader{name: "f.jsonl"}
		err = strict.readLines(bufio.NewReader(bytes.NewReader(b)), func(int, record, int64) error { return nil })
		if (err != nil) != (rr.skipped > 0) {
			t.Fatalf("strict error %v but %d lines skipped", err, rr.skipped)
		}
		if err != nil && !strings.Contains(err.Error(), "f.jsonl:") {
			t.Fatalf("error %q does not name file:line", err)
		}
	})
}
