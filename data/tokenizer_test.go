package data

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGPT2Tokenizer(t *testing.T) {
	tok, err := NewTokenizer("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name() != "gpt2" || tok.EOT() != 50256 || tok.VocabSize() != 50257 {
		t.Fatalf("gpt2: name %q eot %d vocab %d", tok.Name(), tok.EOT(), tok.VocabSize())
	}
	// GPT-2's own ids for "Hello" and " world".
	if got := tok.Encode("Hello world"); len(got) != 2 || got[0] != 15496 || got[1] != 995 {
		t.Fatalf(`Encode("Hello world") = %v, want [15496 995]`, got)
	}
	for _, s := range []string{
		"",
		"The quick brown fox jumps over the lazy dog.\n\n\tIndented  spaces   here",
		"naïve café — 東京 🚀 ümlaut",
		"func main() {\n\tfmt.Println(\"hi\")\n}\n",
	} {
		ids := tok.Encode(s)
		for _, id := range ids {
			if id < 0 || id >= 50256 {
				t.Fatalf("Encode(%q) produced id %d outside the ordinary vocabulary", s, id)
			}
		}
		if got := tok.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
	}
	// Ordinary-text semantics: the special token's spelling is just text.
	s := "a<|endoftext|>b"
	ids := tok.Encode(s)
	for _, id := range ids {
		if id == 50256 {
			t.Fatalf("Encode(%q) = %v contains EOT", s, ids)
		}
	}
	if tok.Decode(ids) != s {
		t.Fatalf("special-token text does not round-trip")
	}
	if got := tok.Decode([]int{50256}); got != "<|endoftext|>" {
		t.Fatalf("Decode([EOT]) = %q", got)
	}
}

func TestByteTokenizer(t *testing.T) {
	tok, err := NewTokenizer("byte")
	if err != nil {
		t.Fatal(err)
	}
	if tok.Name() != "byte" || tok.EOT() != 256 || tok.VocabSize() != 257 {
		t.Fatalf("byte: name %q eot %d vocab %d", tok.Name(), tok.EOT(), tok.VocabSize())
	}
	ids := tok.Encode("Hé")
	if want := []int{'H', 0xc3, 0xa9}; len(ids) != 3 || ids[0] != want[0] || ids[1] != want[1] || ids[2] != want[2] {
		t.Fatalf(`Encode("Hé") = %v, want %v`, ids, want)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		b := make([]byte, r.IntN(64))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		if got := tok.Decode(tok.Encode(string(b))); got != string(b) {
			t.Fatalf("round trip of %x gave %x", b, got)
		}
	}
	if got := tok.Decode([]int{'a', 256, 'b', 999}); got != "a<|endoftext|>b\uFFFD" {
		t.Fatalf("Decode with EOT and an unknown id = %q", got)
	}
}

func TestNewTokenizerUnknown(t *testing.T) {
	_, err := NewTokenizer("sentencepiece")
	if err == nil || !strings.Contains(err.Error(), "sentencepiece") || !strings.Contains(err.Error(), "gpt2") {
		t.Fatalf("unknown tokenizer: %v", err)
	}
}

func TestTokenizerInfoFile(t *testing.T) {
	dir := t.TempDir()
	if err := WriteTokenizerInfo(dir, NewByteTokenizer()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != `{"tokenizer":"byte","eot":256,"vocab_size":257}` {
		t.Fatalf("tokenizer.json = %s", got)
	}
	info, err := ReadTokenizerInfo(dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := info.Open()
	if err != nil || tok.Name() != "byte" {
		t.Fatalf("Open: %v %v", tok, err)
	}
	info.EOT = 50256
	if _, err := info.Open(); err == nil || !strings.Contains(err.Error(), "eot 50256") {
		t.Fatalf("mismatched eot: %v", err)
	}
	if _, err := ReadTokenizerInfo(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("missing file: %v", err)
	}
}

// tokenizerInfoErr writes content as dir/tokenizer.json and returns what
// ReadTokenizerInfo says about it.
func tokenizerInfoErr(t *testing.T, content string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	path := writeFile(t, filepath.Join(dir, TokenizerInfoFile), []byte(content))
	_, err := ReadTokenizerInfo(dir)
	return path, err
}

// The defect: "vocab_size": -5 was accepted and sized a model's embedding
// with it (a panic in model init).
func TestTokenizerInfoNegativeVocabSizeRefused(t *testing.T) {
	path, err := tokenizerInfoErr(t, `{"tokenizer":"gpt2","eot":50256,"vocab_size":-5}`)
	wantErr(t, err, path, `"vocab_size" is -5`, "50257")
}

// The defect: a huge vocab_size was accepted and the model built from it
// died in a fatal out-of-memory. It must be refused before anything is
// sized from it, whatever the integer.
func TestTokenizerInfoHugeVocabSizeRefused(t *testing.T) {
	for _, v := range []string{"100000000000", "9223372036854775807", "2147483648"} {
		path, err := tokenizerInfoErr(t, `{"tokenizer":"byte","eot":256,"vocab_size":`+v+`}`)
		wantErr(t, err, path, `"vocab_size" is `+v)
	}
	// Beyond int64 it is not even an integer Go can hold.
	path, err := tokenizerInfoErr(t, `{"tokenizer":"byte","eot":256,"vocab_size":1e30}`)
	wantErr(t, err, path, "not valid JSON", "vocab_size")
}

// The defect: a tokenizer.json that did not parse was ignored when the run
// started and only failed (or was silently skipped) after training.
func TestTokenizerInfoUnparsableRefused(t *testing.T) {
	for _, content := range []string{`not json{`, ``, `[1,2]`, `{"tokenizer":"gpt2",`, `{"tokenizer":7}`} {
		path, err := tokenizerInfoErr(t, content)
		wantErr(t, err, path, "not valid JSON")
	}
}

// Every other bad value is an error naming the file and the value.
func TestTokenizerInfoBadValuesRefused(t *testing.T) {
	for _, tc := range []struct{ content, say string }{
		{`{"tokenizer":"gpt2","eot":50256,"vocab_size":0}`, `"vocab_size" is 0`},
		{`{"tokenizer":"sentencepiece","eot":1,"vocab_size":32000}`, `unknown tokenizer "sentencepiece"`},
		{`{"eot":1,"vocab_size":32000}`, `no "tokenizer" name`},
		{`{"tokenizer":"byte","eot":-1,"vocab_size":257}`, `"eot" is -1`},
		{`{"tokenizer":"byte","eot":50256,"vocab_size":257}`, `"eot" is 50256`},
		// A Hugging Face tokenizer.json is loaded whole, and a bad one says why.
		{`{"version":"1.0","model":{"type":"BPE"}}`, "Hugging Face tokenizer"},
		{`{"version":"1.0","model":{"type":"BPE"}}`, "model: vocab is empty"},
	} {
		path, err := tokenizerInfoErr(t, tc.content)
		wantErr(t, err, path, tc.say)
	}
	// A file far larger than gotrain ever writes is refused unread.
	path, err := tokenizerInfoErr(t, `{"tokenizer":"byte","eot":256,"vocab_size":257}`+strings.Repeat(" ", maxTokenizerInfoBytes))
	wantErr(t, err, path, "bytes, more than")
}

// FuzzTokenizerInfo feeds arbitrary bytes to tokenizer.json's parser: it
// never panics, every error names the file, and what it accepts is a
// tokenizer NewTokenizer builds with exactly the recorded sizes.
func FuzzTokenizerInfo(f *testing.F) {
	f.Add([]byte(`{"tokenizer":"byte","eot":256,"vocab_size":257}`))
	f.Add([]byte(`{"tokenizer":"gpt2","eot":50256,"vocab_size":50257}`))
	f.Add([]byte(`{"tokenizer":"gpt2","eot":50256,"vocab_size":-5}`))
	f.Add([]byte(`{"tokenizer":"gpt2","eot":50256,"vocab_size":9223372036854775807}`))
	f.Add([]byte(`{"version":"1.0","model":{"type":"BPE"}}`))
	f.Add([]byte(`not json{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseTokenizerInfo("fuzz/tokenizer.json", b)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz/tokenizer.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		vocab, eot, ok := knownTokenizer(info.Tokenizer)
		if !ok || info.VocabSize != vocab || info.EOT != eot {
			t.Fatalf("accepted %+v", info)
		}
	})
}

// TestHFTokenizerWithoutModelIsNamed: a Hugging Face tokenizer.json that
// lost its "model" section was read as gotrain's own record and refused
// for having no "tokenizer" name. It must be recognised by its other sections
// and refused as an incomplete Hugging Face file, wherever it is read.
func TestHFTokenizerWithoutModelIsNamed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, TokenizerInfoFile)
	doc := `{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [{"id": 0, "content": "<|endoftext|>", "special": true}],
		"normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}, "post_processor": null,
		"decoder": {"type": "ByteLevel"}}`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		for _, want := range []string{path, "Hugging Face tokenizer.json", `without its "model" section`, "copy tokenizer.json again"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not say %q", what, err, want)
			}
		}
		if strings.Contains(err.Error(), `no "tokenizer" name`) {
			t.Errorf("%s: %q reads the file as gotrain's record", what, err)
		}
	}
	_, err := NewTokenizer(path)
	check("NewTokenizer(file)", err)
	_, err = NewTokenizer(dir)
	check("NewTokenizer(dir)", err)
	_, err = ReadTokenizerInfo(dir)
	check("ReadTokenizerInfo", err)
}
