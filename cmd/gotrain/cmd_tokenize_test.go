package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

// parseArrays reads tokenize's output: one JSON array per line.
func parseArrays(t *testing.T, out string) [][]int {
	t.Helper()
	var arrays [][]int
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var ids []int
		if err := json.Unmarshal([]byte(l), &ids); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		arrays = append(arrays, ids)
	}
	return arrays
}

// tokenizerRefs is data/testdata/tokenizer_refs/NAME.json, made by
// scripts/tokenizer_refs.mjs with the JavaScript port of Hugging Face's
// tokenizers.
type tokenizerRefs struct {
	PostForSpecial json.RawMessage `json:"post_processor_for_special"`
	Cases          []struct {
		Text       string `json:"text"`
		IDs        []int  `json:"ids"`
		IDsSpecial []int  `json:"ids_special"`
	} `json:"cases"`
	WholeFile struct {
		IDs []int `json:"ids"`
	} `json:"whole_file"`
}

// The acceptance test: on the committed hostile corpus, gotrain tokenize
// gives the reference ids of Qwen3 and Llama 3 for every line and for the
// whole file, with special tokens added too, and --decode gives every line
// back (after NFC for Qwen3, which normalizes).
func TestTokenizeMatchesReferenceIDs(t *testing.T) {
	corpus := filepath.Join("..", "..", "data", "testdata", "tokenizer_corpus.txt")
	text, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			dir := hftoktest.Dir(t, name)
			var refs tokenizerRefs
			b, err := os.ReadFile(filepath.Join("..", "..", "data", "testdata", "tokenizer_refs", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &refs); err != nil {
				t.Fatal(err)
			}
			out, _, err := run(t, "tokenize", "--tokenizer", dir, "--lines", corpus, corpus)
			if err != nil {
				t.Fatal(err)
			}
			got := parseArrays(t, out)
			if len(got) != 2*len(refs.Cases) {
				t.Fatalf("%d arrays for %d lines, twice", len(got), len(refs.Cases))
			}
			for i, c := range refs.Cases {
				if !slices.Equal(got[i], c.IDs) || !slices.Equal(got[len(refs.Cases)+i], c.IDs) {
					t.Errorf("line %d %q:\n got %v\nwant %v", i+1, c.Text, got[i], c.IDs)
				}
			}
			out, _, err = run(t, "tokenize", "--tokenizer", filepath.Join(dir, "tokenizer.json"), corpus)
			if err != nil {
				t.Fatal(err)
			}
			if whole := parseArrays(t, out); len(whole) != 1 || !slices.Equal(whole[0], refs.WholeFile.IDs) {
				t.Errorf("whole file: %d arrays, first %d ids, want %d", len(whole), len(whole[0]), len(refs.WholeFile.IDs))
			}

			// --decode, line by line, then the whole file's array.
			var arrays strings.Builder
			for _, ids := range append(got[:len(refs.Cases)], refs.WholeFile.IDs) {
				js, _ := json.Marshal(ids)
				arrays.Write(append(js, '\n'))
			}
			idsFile := filepath.Join(t.TempDir(), "ids.json")
			writeTestFile(t, idsFile, arrays.String())
			back, _, err := run(t, "tokenize", "--tokenizer", dir, "--decode", "--lines", idsFile)
			if err != nil {
				t.Fatal(err)
			}
			nfc := func(s string) string { return s }
			if name == "qwen3" {
				nfc = norm.NFC.String
			}
			for i, l := range lines {
				want := nfc(l) + "\n"
				if !strings.HasPrefix(back, want) {
					t.Fatalf("line %d does not round-trip: %q", i+1, l)
				}
				back = back[len(want):]
			}
			if back != nfc(string(text))+"\n" {
				t.Errorf("the whole file does not round-trip")
			}

			// With special tokens added: the post-processor the references
			// used (Llama 3's current BOS template) patched into a copy.
			special := dir
			if refs.PostForSpecial != nil {
				special = t.TempDir()
				var doc map[string]json.RawMessage
				if err := json.Unmarshal(mustReadFile(t, filepath.Join(dir, "tokenizer.json")), &doc); err != nil {
					t.Fatal(err)
				}
				doc["post_processor"] = refs.PostForSpecial
				patched, _ := json.Marshal(doc)
				writeTestFile(t, filepath.Join(special, "tokenizer.json"), string(patched))
				writeTestFile(t, filepath.Join(special, "tokenizer_config.json"), string(mustReadFile(t, filepath.Join(dir, "tokenizer_config.json"))))
			}
			out, _, err = run(t, "tokenize", "--tokenizer", special, "--add-special-tokens", "--lines", corpus)
			if err != nil {
				t.Fatal(err)
			}
			for i, ids := range parseArrays(t, out) {
				if !slices.Equal(ids, refs.Cases[i].IDsSpecial) {
					t.Errorf("line %d with special tokens:\n got %v\nwant %v", i+1, ids, refs.Cases[i].IDsSpecial)
				}
			}
		})
	}
}

func writeTestFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// GPT-2 needs no files: the published ids of "Hello world", special tokens
// matched unless split, skipped on decode when asked, and the errors.
func TestTokenizeGPT2AndErrors(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.txt")
	writeTestFile(t, f, "Hello world")
	g := filepath.Join(dir, "b.txt")
	writeTestFile(t, g, "a<|endoftext|>b\n\nc")
	out, _, err := run(t, "tokenize", f, g)
	if err != nil || out != "[15496,995]\n[64,50256,65,198,198,66]\n" {
		t.Fatalf("tokenize: %q %v", out, err)
	}
	out, _, err = run(t, "tokenize", "--split-special-tokens", "--lines", g)
	if err != nil || strings.Contains(out, "50256") || strings.Count(out, "\n") != 3 || !strings.Contains(out, "\n[]\n") {
		t.Fatalf("split special tokens, by line: %q %v", out, err)
	}
	ids := filepath.Join(dir, "ids.json")
	writeTestFile(t, ids, "[64,50256,65] [15496,995]")
	if out, _, err := run(t, "tokenize", "--decode", ids); err != nil || out != "a<|endoftext|>bHello world" {
		t.Fatalf("decode: %q %v", out, err)
	}
	if out, _, err := run(t, "tokenize", "--decode", "--skip-special-tokens", "--lines", ids); err != nil || out != "ab\nHello world\n" {
		t.Fatalf("decode skipping special tokens: %q %v", out, err)
	}
	for _, tc := range []struct {
		args []string
		say  string
	}{
		{[]string{"tokenize"}, "no files"},
		{[]string{"tokenize", filepath.Join(dir, "missing.txt")}, "missing.txt"},
		{[]string{"tokenize", "--tokenizer", "sentencepiece", f}, `unknown tokenizer "sentencepiece"`},
		{[]string{"tokenize", "--decode", f}, "array 1: want a JSON array of token ids"},
		{[]string{"tokenize", "--decode", "--add-special-tokens", ids}, "for encoding"},
		{[]string{"tokenize", "--skip-special-tokens", f}, "is for --decode"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.say)
		}
	}
	// A flag after the file is read as a flag, as argparse reads it (argv.go).
	after, _, errAfter := run(t, "tokenize", f, "--lines")
	before, _, errBefore := run(t, "tokenize", "--lines", f)
	if errAfter != nil || errBefore != nil || after != before {
		t.Errorf("tokenize FILE --lines: %q, %v; tokenize --lines FILE: %q, %v", after, errAfter, before, errBefore)
	}
	writeTestFile(t, ids, "[1,2]\n[50257]")
	if _, _, err := run(t, "tokenize", "--decode", ids); err == nil || !strings.Contains(err.Error(), "array 2: id 50257 is outside the vocabulary of gpt2 [0, 50257)") {
		t.Fatalf("id out of range: %v", err)
	}
}

// A directory prepared with a Hugging Face tokenizer holds uint32 shards and
// the tokenizer's own files: train's start-up check reads its vocabulary
// from them, the copy beside trained weights is the same tokenizer, and the
// directory itself works as --tokenizer.
func TestPrepareWithHFTokenizer(t *testing.T) {
	dir := hftoktest.Dir(t, "qwen3")
	in := t.TempDir()
	writeTestFile(t, filepath.Join(in, "a.txt"), "Hello world<|im_start|>")
	writeTestFile(t, filepath.Join(in, "b.txt"), "中文测试")
	out := filepath.Join(t.TempDir(), "data")
	stdout, _, err := run(t, "data", "prepare", "--tokenizer", dir, "--output", out, "--val-fraction", "0", in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "eot 151643, vocab 151669, uint32 shards") {
		t.Fatalf("summary: %s", stdout)
	}
	info, err := dataTokenizer([]string{filepath.Join(out, "train_*.bin")}, nil)
	if err != nil || info == nil || info.VocabSize != 151669 || info.EOT != 151643 || info.SHA256 == "" {
		t.Fatalf("dataTokenizer: %+v %v", info, err)
	}
	weights := t.TempDir()
	if err := copyTokenizerInfo([]string{filepath.Join(out, "train_*.bin")}, weights); err != nil {
		t.Fatal(err)
	}
	tok, err := sampleTokenizer(weights, "gpt2")
	if err != nil || tok.VocabSize() != 151669 || tok.Decode([]int{9707, 1879}) != "Hello world" {
		t.Fatalf("sample's tokenizer: %v %v", tok, err)
	}
	ids, _, err := run(t, "tokenize", "--tokenizer", out, "--split-special-tokens", filepath.Join(in, "a.txt"))
	if err != nil || strings.Contains(ids, "151644") || !strings.HasPrefix(ids, "[9707,1879,") {
		t.Fatalf("tokenize with the prepared directory: %q %v", ids, err)
	}
}
