package data

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
