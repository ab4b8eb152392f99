package data

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

// hfSpec is a small byte-level BPE tokenizer.json written for a test: the
// 256 byte characters (ids 0..255), filler entries up to vocab ids, one
// merge ("t" "h"), then the added tokens.
type hfSpec struct {
	vocab  int      // model vocabulary size, ≥ 257
	added  []string // special added tokens, ids from vocab on
	config map[string]any
	post   any
}

// byteChar spells byte b as byte-level BPE does (GPT-2's bytes_to_unicode).
func byteChar(b int) string {
	switch {
	case b >= 0x21 && b <= 0x7E, b >= 0xA1 && b <= 0xAC, b >= 0xAE:
		return string(rune(b))
	case b <= 0x20:
		return string(rune(0x100 + b))
	case b <= 0xA0:
		return string(rune(0x100 + 33 + b - 0x7F))
	}
	return string(rune(0x100 + 67))
}

func (s hfSpec) write(t testing.TB, dir string) string {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[byteChar(b)] = b
	}
	vocab["th"] = 256
	for i := 257; i < s.vocab; i++ {
		vocab[fmt.Sprintf("<filler%d>", i)] = i
	}
	var added []any
	for i, a := range s.added {
		added = append(added, map[string]any{"id": max(s.vocab, 257) + i, "content": a, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	doc := map[string]any{
		"version": "1.0", "added_tokens": added, "normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"post_processor": s.post,
		"decoder":        map[string]any{"type": "ByteLevel"},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"t h"}},
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, filepath.Join(dir, "tokenizer.json"), b)
	if s.config != nil {
		cb, _ := json.Marshal(s.config)
		writeFile(t, filepath.Join(dir, "tokenizer_config.json"), cb)
	}
	return path
}

// The document separator: BOS when there is one, else <|endoftext|>, else
// EOS; a tokenizer with none of them cannot be used to prepare data.
func TestHFTokenizerDocumentSeparator(t *testing.T) {
	bosTemplate := map[string]any{"type": "TemplateProcessing",
		"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<b>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}},
		"special_tokens": map[string]any{"<b>": map[string]any{"id": "<b>", "ids": []int{258}, "tokens": []string{"<b>"}}}}
	for _, tc := range []struct {
		name string
		spec hfSpec
		eot  int
		err  string
	}{
		{"bos from config", hfSpec{added: []string{"<|endoftext|>", "<b>"}, config: map[string]any{"bos_token": "<b>"}}, 258, ""},
		{"bos from template", hfSpec{added: []string{"<|endoftext|>", "<b>"}, post: bosTemplate}, 258, ""},
		{"endoftext", hfSpec{added: []string{"<|endoftext|>", "<e>"}, config: map[string]any{"eos_token": "<e>"}}, 257, ""},
		{"eos", hfSpec{added: []string{"<x>", "<e>"}, config: map[string]any{"eos_token": "<e>"}}, 258, ""},
		{"none", hfSpec{added: []string{"<x>"}}, 0, "cannot tell which token separates documents"},
	} {
		path := tc.spec.write(t, t.TempDir())
		tok, err := NewTokenizer(path)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), path) {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tok.EOT() != tc.eot || tok.VocabSize() != 257+len(tc.spec.added) {
			t.Errorf("%s: eot %d vocab %d", tc.name, tok.EOT(), tok.VocabSize())
		}
	}
}

// A vocabulary beyond 65,535 ids makes uint32 shards (llm.c's Llama 3
// variant); the Hugging Face files are copied beside them, and the directory
// then reads back as the same tokenizer.
func TestPrepareHFTokenizerWritesUint32ShardsAndItsFiles(t *testing.T) {
	src := t.TempDir()
	hfSpec{vocab: 70000, added: []string{"<|endoftext|>", "<|im_start|>"},
		config: map[string]any{"eos_token": "<|im_start|>", "chat_template": "{{ x }}"}}.write(t, src)
	tok, err := NewTokenizer(src)
	if err != nil {
		t.Fatal(err)
	}
	if tok.EOT() != 70000 || tok.VocabSize() != 70002 || ShardFormatFor(tok.VocabSize()) != ShardLlama3 {
		t.Fatalf("eot %d vocab %d", tok.EOT(), tok.VocabSize())
	}
	in := t.TempDir()
	docs := []string{"the thin <|im_start|> cat", "e\u0301 and é"}
	for i, d := range docs {
		writeFile(t, filepath.Join(in, fmt.Sprintf("%d.txt", i)), []byte(d))
	}
	out := filepath.Join(t.TempDir(), "data")
	sum, err := Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: tok, OutputDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Format != ShardLlama3 {
		t.Fatalf("format %v", sum.Format)
	}
	h, got, err := ReadShard(sum.Train.Shards[0])
	if err != nil {
		t.Fatal(err)
	}
	var want []int32
	for _, d := range docs {
		want = append(want, 70000)
		for _, id := range tok.Encode(d) {
			want = append(want, int32(id))
		}
	}
	if h.Format != ShardLlama3 || !slices.Equal(got, want) {
		t.Fatalf("shard %v holds %v, want %v", h.Format, got, want)
	}
	// Ordinary text: the spelled special token is not its id; NFC joins é.
	if slices.Contains(got, 70001) || !slices.Contains(got, 256) {
		t.Fatalf("tokens %v", got)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		a, _ := os.ReadFile(filepath.Join(src, f))
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s was not copied beside the shards: %v", f, err)
		}
	}
	info, err := ReadTokenizerInfo(out)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Same(InfoOf(tok)) || info.EOT != 70000 || info.VocabSize != 70002 || info.SHA256 == "" || info.Tokenizer != out {
		t.Fatalf("info %+v vs %+v", info, InfoOf(tok))
	}
	back, err := info.Open()
	if err != nil {
		t.Fatal(err)
	}
	if hf := back.(*HFTokenizer); hf.HF().Config().ChatTemplate != "{{ x }}" || hf.HF().Config().EOS.ID != 70001 {
		t.Fatalf("config not read back: %+v", hf.HF().Config())
	}
	var last []int
	for _, id := range got[len(got)-len(tok.Encode(docs[1])):] {
		last = append(last, int(id))
	}
	if s := back.Decode(last); s != norm.NFC.String(docs[1]) {
		t.Fatalf("the copy decodes the last document as %q", s)
	}
	// The copy changed after it was read: Open refuses it.
	writeFile(t, filepath.Join(out, "tokenizer.json"), append(mustRead(t, filepath.Join(out, "tokenizer.json")), ' '))
	if _, err := info.Open(); err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Fatalf("changed tokenizer.json: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A data directory of gpt2 shards and a Hugging Face one prepared with the
// same file are told apart, and two copies of one Hugging Face tokenizer are
// the same wherever they are.
func TestTokenizerInfoSame(t *testing.T) {
	a := hfSpec{added: []string{"<|endoftext|>"}}
	ta, err := NewTokenizer(a.write(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := NewTokenizer(a.write(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	tc, err := NewTokenizer(hfSpec{added: []string{"<|endoftext|>", "<x>"}}.write(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ia, ib, ic := InfoOf(ta), InfoOf(tb), InfoOf(tc)
	if ia == ib || !ia.Same(ib) || ia.Same(ic) || ia.Same(InfoOf(NewByteTokenizer())) || !InfoOf(NewByteTokenizer()).Same(InfoOf(NewByteTokenizer())) {
		t.Fatalf("Same: %+v %+v %+v", ia, ib, ic)
	}
}

// The model directory's tokenizer: a snapshot's tokenizer.json, a prepared
// directory's record, or an error that says what is missing.
func TestTokenizerForModelDir(t *testing.T) {
	snap := t.TempDir()
	hfSpec{added: []string{"<|endoftext|>"}}.write(t, snap)
	writeFile(t, filepath.Join(snap, "config.json"), []byte(`{"model_type": "qwen3"}`))
	tok, err := TokenizerForModelDir(snap)
	if err != nil || tok.Name() != snap || tok.EOT() != 257 {
		t.Fatalf("snapshot: %v %v", tok, err)
	}
	prepared := t.TempDir()
	if err := WriteTokenizerInfo(prepared, NewByteTokenizer()); err != nil {
		t.Fatal(err)
	}
	if tok, err := TokenizerForModelDir(prepared); err != nil || tok.Name() != "byte" {
		t.Fatalf("prepared: %v %v", tok, err)
	}
	empty := t.TempDir()
	_, err = TokenizerForModelDir(empty)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), empty) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := NewTokenizer(filepath.Join(empty, "nope.json")); err == nil || !strings.Contains(err.Error(), "unknown tokenizer") ||
		!strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("missing path: %v", err)
	}
	// Preparing data into the snapshot would replace its tokenizer.json.
	in := t.TempDir()
	writeFile(t, filepath.Join(in, "a.txt"), []byte("x"))
	_, err = Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: snap})
	if err == nil || !strings.Contains(err.Error(), "directory of their own") {
		t.Fatalf("prepare into a model snapshot: %v", err)
	}
}

func TestEncodeWithSpecialTokens(t *testing.T) {
	gpt2, err := NewTokenizer("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	text := "a<|endoftext|>b"
	if got := EncodeWith(gpt2, text, EncodeOptions{MatchSpecialTokens: true}); !slices.Equal(got, []int{64, 50256, 65}) {
		t.Errorf("gpt2 matching special tokens: %v", got)
	}
	if got := EncodeWith(gpt2, text, EncodeOptions{}); slices.Contains(got, 50256) || !slices.Equal(got, gpt2.Encode(text)) {
		t.Errorf("gpt2 ordinary: %v", got)
	}
	if got := DecodeWith(gpt2, []int{64, 50256, 65}, true); got != "ab" {
		t.Errorf("gpt2 skipping special tokens: %q", got)
	}
	if got := DecodeWith(NewByteTokenizer(), []int{'a', 256, 'b'}, true); got != "ab" {
		t.Errorf("byte skipping EOT: %q", got)
	}
}

// Through the data package's interface, the real tokenizers give the
// reference ids when they match special tokens as transformers does, keep
// special tokens as text in Encode, and decode every corpus line back.
func TestRealHFTokenizersThroughData(t *testing.T) {
	corpus := string(mustRead(t, filepath.Join("testdata", "tokenizer_corpus.txt")))
	for _, tc := range []struct {
		name      string
		eot, size int
	}{{"qwen3", 151643, 151669}, {"llama3", 128000, 128256}} {
		dir := hftoktest.Dir(t, tc.name)
		tok, err := NewTokenizer(dir)
		if err != nil {
			t.Fatal(err)
		}
		if tok.EOT() != tc.eot || tok.VocabSize() != tc.size {
			t.Errorf("%s: eot %d vocab %d", tc.name, tok.EOT(), tok.VocabSize())
		}
		var refs struct {
			Cases []struct {
				Text string `json:"text"`
				IDs  []int  `json:"ids"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(mustRead(t, filepath.Join("testdata", "tokenizer_refs", tc.name+".json")), &refs); err != nil {
			t.Fatal(err)
		}
		hf := tok.(*HFTokenizer)
		for _, c := range refs.Cases {
			if got := EncodeWith(tok, c.Text, EncodeOptions{MatchSpecialTokens: true}); !slices.Equal(got, c.IDs) {
				t.Errorf("%s %q: %v, want %v", tc.name, c.Text, got, c.IDs)
			}
			ids := tok.Encode(c.Text)
			for _, id := range ids {
				if hf.HF().IsSpecial(id) {
					t.Errorf("%s %q: Encode matched special token %d", tc.name, c.Text, id)
				}
			}
			want := c.Text
			if tc.name == "qwen3" {
				want = norm.NFC.String(want)
			}
			if got := tok.Decode(ids); got != want {
				t.Errorf("%s: %q decodes to %q", tc.name, c.Text, got)
			}
		}
		if got := tok.Decode(tok.Encode(corpus)); tc.name == "llama3" && got != corpus {
			t.Errorf("%s: the corpus does not round-trip", tc.name)
		}
	}
}
