package data

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type jsonlDoc struct {
	line int
	text string
	n    int64
}

func readJSONLString(t testing.TB, field string, skip bool, s string) ([]jsonlDoc, int64, error) {
	t.Helper()
	j := &jsonlReader{name: "docs.jsonl", field: field, skipBad: skip}
	var docs []jsonlDoc
	err := j.read(strings.NewReader(s), func(line int, text string, n int64) error {
		docs = append(docs, jsonlDoc{line, text, n})
		return nil
	})
	return docs, j.skipped, err
}

func TestJSONLReader(t *testing.T) {
	lines := []string{
		"\xef\xbb\xbf{\"text\": \"first\", \"id\": 1}\r\n",
		"\n",
		"   \n",
		"{\"id\": 2, \"text\": \"second\\nline \\u00e9\"}\n",
		"{\"text\": \"\"}\n",
		"{\"text\": \"no newline at end\"}",
	}
	in := strings.Join(lines, "")
	docs, skipped, err := readJSONLString(t, "text", false, in)
	if err != nil {
		t.Fatal(err)
	}
	size := func(i int) int64 { return int64(len(lines[i])) }
	want := []jsonlDoc{{1, "first", size(0)}, {4, "second\nline é", size(3)}, {5, "", size(4)}, {6, "no newline at end", size(5)}}
	if len(docs) != len(want) || skipped != 0 {
		t.Fatalf("docs %+v skipped %d", docs, skipped)
	}
	for i, d := range docs {
		if d != want[i] {
			t.Errorf("doc %d = %+v, want %+v", i, d, want[i])
		}
	}

	docs, _, err = readJSONLString(t, "content", false, `{"text": "x", "content": "y"}`)
	if err != nil || len(docs) != 1 || docs[0].text != "y" {
		t.Fatalf("custom field: %+v %v", docs, err)
	}
}

func TestJSONLReaderErrors(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"{\"text\": \"ok\"}\n{\"text\": \"unterminated}\n", "docs.jsonl:2: bad JSON"},
		{"{\"text\": \"ok\"}\n\n{\"body\": \"x\"}\n", "docs.jsonl:3: no \"text\" field"},
		{"{\"text\": 5}\n", "docs.jsonl:1: field \"text\" is not a string"},
		{"null\n", "docs.jsonl:1: bad JSON"},
		{"[1, 2]\n", "docs.jsonl:1: bad JSON"},
	} {
		_, _, err := readJSONLString(t, "text", false, tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("input %q: error %v, want %q", tc.in, err, tc.want)
		}
		docs, skipped, err := readJSONLString(t, "text", true, tc.in)
		if err != nil || skipped != 1 {
			t.Errorf("input %q with skipping: %v, skipped %d", tc.in, err, skipped)
		}
		for _, d := range docs {
			if d.text != "ok" {
				t.Errorf("input %q with skipping yielded %q", tc.in, d.text)
			}
		}
	}
}

func FuzzJSONLReader(f *testing.F) {
	f.Add([]byte("{\"text\": \"a\"}\n{\"text\": 1}\n"))
	f.Add([]byte("\xef\xbb\xbf{\"text\":\"\\ud800\"}\r\n\n"))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, b []byte) {
		j := &jsonlReader{name: "f.jsonl", field: "text", skipBad: true}
		last := 0
		var total int64
		err := j.read(bytes.NewReader(b), func(line int, text string, n int64) error {
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
			t.Fatalf("documents cover %d bytes of %d", total, len(b))
		}
		strict := &jsonlReader{name: "f.jsonl", field: "text"}
		err = strict.read(bytes.NewReader(b), func(int, string, int64) error { return nil })
		if (err != nil) != (j.skipped > 0) {
			t.Fatalf("strict error %v but %d lines skipped", err, j.skipped)
		}
		if err != nil && !strings.Contains(err.Error(), "f.jsonl:") {
			t.Fatalf("error %q does not name file:line", err)
		}
	})
}

func TestResolveInputs(t *testing.T) {
	dir := t.TempDir()
	mk := func(rel, content string) string {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		return writeFile(t, p, []byte(content))
	}
	mk("corpus/b.txt", "b")
	mk("corpus/a/z.txt", "z")
	mk("corpus/a/y.jsonl", `{"text":"y"}`)
	mk("corpus/README.md", "not a document")
	mk("corpus/.hidden/h.txt", "hidden")
	mk("corpus/empty.txt", "")
	mk("code/main.go", "package main")
	mk("code/testdata/golden.json", `{"not": "a record with text"}`)
	mk("docs/notes.md", "not a document")
	set, err := resolveInputs([]string{filepath.Join(dir, "corpus"), filepath.Join(dir, "code", "*.go")}, []string{".txt", "go"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range set.files {
		rel, _ := filepath.Rel(dir, f.path)
		got = append(got, rel)
	}
	want := []string{"code/main.go", "corpus/a/y.jsonl", "corpus/a/z.txt", "corpus/b.txt"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("files %v, want %v", got, want)
	}
	if set.skippedEmpty != 1 || set.bytes != int64(len("package main")+len(`{"text":"y"}`)+2) {
		t.Fatalf("skipped %d empty, %d bytes", set.skippedEmpty, set.bytes)
	}
	if set.files[1].kind != inputJSONL || set.files[2].kind != inputText {
		t.Fatal("wrong kinds")
	}

	// With --ext a walk takes only those extensions and .jsonl (a source
	// tree's testdata .json files are not records); without it, or with
	// --ext .json, the .json file counts.
	for _, tc := range []struct {
		exts []string
		want string
	}{
		{[]string{".go"}, "code/main.go"},
		{nil, "code/testdata/golden.json"},
		{[]string{".go", ".json"}, "code/main.go,code/testdata/golden.json"},
	} {
		set, err := resolveInputs([]string{filepath.Join(dir, "code")}, tc.exts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range set.files {
			rel, _ := filepath.Rel(dir, f.path)
			got = append(got, rel)
		}
		if strings.Join(got, ",") != tc.want {
			t.Errorf("--ext %v: files %v, want %s", tc.exts, got, tc.want)
		}
	}

	for _, tc := range []struct {
		input, want string
	}{
		{filepath.Join(dir, "missing.txt"), "missing.txt"},
		{filepath.Join(dir, "nomatch_*.txt"), "matches no files"},
		{filepath.Join(dir, "corpus", "empty.txt"), "empty.txt is empty"},
		{filepath.Join(dir, "corpus", "README.md"), "unsupported extension \".md\""},
		{filepath.Join(dir, "corpus", ".hidden", "*.md"), "matches no files"},
		{filepath.Join(dir, "docs"), "holds no non-empty .txt or .jsonl files"},
	} {
		_, err := resolveInputs([]string{tc.input}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("input %s: error %v, want %q", tc.input, err, tc.want)
		}
	}
}
