package data

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// inputKind says how a file splits into documents.
type inputKind int

const (
	inputText    inputKind = iota // the whole file is one document
	inputJSONL                    // one JSON object per line (.jsonl, .jsonl.gz)
	inputJSON                     // a JSON array of objects, or JSON Lines (.json, .json.gz)
	inputParquet                  // a Parquet file, one record per row
)

type inputFile struct {
	path string
	kind inputKind
	size int64
}

// inputSet is the resolved, sorted list of input files.
type inputSet struct {
	files        []inputFile
	bytes        int64
	skippedEmpty int // empty files found by a directory walk or a glob
}

// resolveInputs expands files, directories (recursively) and globs into the
// sorted list of documents' files. Files named explicitly must have a known
// extension and must not be empty; files found by a walk or a glob with other
// extensions are ignored and empty ones skipped, so a corpus directory may
// hold other files. A walk takes record files (.json, .json.gz, .jsonl.gz,
// .parquet) only when textExts is empty or names them; .jsonl always. Each input must yield at least one file. Hidden entries
// (".name") below a directory are not walked.
func resolveInputs(inputs []string, textExts []string) (inputSet, error) {
	var set inputSet
	if len(inputs) == 0 {
		return set, fmt.Errorf("no inputs given: pass .txt or .jsonl files, directories or globs")
	}
	exts := normalizeExts(textExts)
	kindOf := func(path string) (inputKind, bool) {
		if k, ok := recordKindOf(path); ok {
			return k, true
		}
		return inputText, slices.Contains(exts, strings.ToLower(filepath.Ext(path)))
	}
	seen := map[string]bool{}
	add := func(path string, size int64) {
		if seen[path] {
			return
		}
		seen[path] = true
		k, _ := kindOf(path)
		set.files = append(set.files, inputFile{path: path, kind: k, size: size})
		set.bytes += size
	}
	// found says whether a file met by a walk or a glob counts. With --ext
	// the walk takes those extensions and .jsonl only, as it always has:
	// `--input $GOROOT/src --ext .go` must not read the tree's testdata
	// .json files as records. Without it, every record format counts.
	found := func(path string) bool {
		k, ok := kindOf(path)
		if !ok || k == inputText || len(textExts) == 0 {
			return ok
		}
		name := strings.ToLower(path)
		return strings.HasSuffix(name, ".jsonl") || slices.ContainsFunc(exts, func(e string) bool { return strings.HasSuffix(name, e) })
	}
	// addFound takes a file met by a walk or a glob; it reports whether the
	// file counts for its input.
	addFound := func(path string, size int64) bool {
		if !found(path) {
			return false
		}
		if size == 0 {
			set.skippedEmpty++
			return false
		}
		add(path, size)
		return true
	}
	walk := func(root string) (int, error) {
		if err := checkArrowDir(root); err != nil {
			return 0, err
		}
		n := 0
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("input: %w", err)
			}
			if path != root && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() {
				return nil
			}
			// Stat follows a symlink to a file; a symlink to a directory is
			// not followed, which keeps cycles out.
			st, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("input: %w", err)
			}
			if st.Mode().IsRegular() && addFound(path, st.Size()) {
				n++
			}
			return nil
		})
		return n, err
	}
	// Record files besides .jsonl: .json, .json.gz, .jsonl.gz, .parquet.
	what := strings.Join(append(slices.Clone(exts), ".jsonl"), " or ")
	for _, in := range inputs {
		if hasGlobMeta(in) {
			matches, err := filepath.Glob(in)
			if err != nil {
				return set, fmt.Errorf("input pattern %q: %w", in, err)
			}
			if len(matches) == 0 {
				return set, fmt.Errorf("input pattern %q matches no files", in)
			}
			n := 0
			for _, m := range matches {
				st, err := os.Stat(m)
				if err != nil {
					return set, fmt.Errorf("input: %w", err)
				}
				if st.IsDir() {
					k, err := walk(m)
					if err != nil {
						return set, err
					}
					n += k
				} else if st.Mode().IsRegular() && addFound(m, st.Size()) {
					n++
				}
			}
			if n == 0 {
				return set, fmt.Errorf("input pattern %q matches no non-empty %s files (nor .json, .json.gz, .jsonl.gz or .parquet ones)", in, what)
			}
			continue
		}
		st, err := os.Stat(in)
		if err != nil {
			return set, fmt.Errorf("input: %w", err)
		}
		if st.IsDir() {
			n, err := walk(in)
			if err != nil {
				return set, err
			}
			if n == 0 {
				return set, fmt.Errorf("input directory %s holds no non-empty %s files (nor .json, .json.gz, .jsonl.gz or .parquet ones)", in, what)
			}
			continue
		}
		if !st.Mode().IsRegular() {
			return set, regularfile.NotRegular("input", in, st.Mode())
		}
		if _, ok := kindOf(in); !ok {
			return set, fmt.Errorf("input %s: unsupported extension %q: want %s, .json, .json.gz, .jsonl.gz or .parquet (JSON and Parquet files hold records, the others one document per file)",
				in, filepath.Ext(in), what)
		}
		if st.Size() == 0 {
			return set, fmt.Errorf("input %s is empty", in)
		}
		add(in, st.Size())
	}
	slices.SortFunc(set.files, func(a, b inputFile) int { return strings.Compare(a.path, b.path) })
	return set, nil
}

// normalizeExts lower-cases extensions and gives each a leading dot; no
// extensions means ".txt".
func normalizeExts(exts []string) []string {
	if len(exts) == 0 {
		return []string{".txt"}
	}
	out := make([]string, 0, len(exts))
	for _, e := range exts {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		out = append(out, e)
	}
	return out
}
