package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// Tokenizer turns text into token ids and back. Implementations are safe for
// concurrent use.
type Tokenizer interface {
	// Encode tokenizes text as ordinary text: a special token written in the
	// text (such as "<|endoftext|>") is encoded as its characters, never as
	// EOT. It does not add EOT.
	Encode(text string) []int
	// Decode turns ids back into text.
	Decode(ids []int) string
	// EOT is the end-of-text id that separates (and, in shards, prefixes)
	// documents.
	EOT() int
	// VocabSize is the number of ids, EOT included (V before padding).
	VocabSize() int
	// Name is the name NewTokenizer accepts.
	Name() string
}

// TokenizerNames lists the names NewTokenizer accepts.
func TokenizerNames() []string { return []string{"gpt2", "byte"} }

// NewTokenizer returns the tokenizer called name: "gpt2" (GPT-2 BPE, 50257
// ids) or "byte" (UTF-8 bytes, 257 ids).
func NewTokenizer(name string) (Tokenizer, error) {
	switch name {
	case "gpt2":
		return NewGPT2Tokenizer()
	case "byte":
		return NewByteTokenizer(), nil
	}
	return nil, fmt.Errorf("unknown tokenizer %q (known: %q)", name, TokenizerNames())
}

// TokenizerInfoFile is the file in a prepared directory that names its
// tokenizer, so training and sampling can find it.
const TokenizerInfoFile = "tokenizer.json"

// TokenizerInfo is the content of tokenizer.json.
type TokenizerInfo struct {
	Tokenizer string `json:"tokenizer"`
	EOT       int    `json:"eot"`
	VocabSize int    `json:"vocab_size"`
}

// InfoOf describes tok for tokenizer.json.
func InfoOf(tok Tokenizer) TokenizerInfo {
	return TokenizerInfo{Tokenizer: tok.Name(), EOT: tok.EOT(), VocabSize: tok.VocabSize()}
}

// WriteTokenizerInfo writes dir/tokenizer.json for tok, atomically.
func WriteTokenizerInfo(dir string, tok Tokenizer) error {
	b, err := json.Marshal(InfoOf(tok))
	if err != nil {
		return fmt.Errorf("encode %s: %w", TokenizerInfoFile, err)
	}
	path := filepath.Join(dir, TokenizerInfoFile)
	tmp, err := os.CreateTemp(dir, "."+TokenizerInfoFile+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// maxTokenizerInfoBytes bounds tokenizer.json: gotrain writes about 50
// bytes, so anything near this size is some other file.
const maxTokenizerInfoBytes = 1 << 20

// knownTokenizer is the vocabulary size and EOT of a tokenizer NewTokenizer
// can build, known without building it (GPT-2's BPE takes a while to load).
func knownTokenizer(name string) (vocab, eot int, ok bool) {
	switch name {
	case "gpt2":
		return gpt2VocabSize, gpt2EOT, true
	case "byte":
		return byteEOT + 1, byteEOT, true
	}
	return 0, 0, false
}

// ReadTokenizerInfo reads and validates dir/tokenizer.json (see
// ParseTokenizerInfo). A missing file is an error that wraps
// fs.ErrNotExist: shards made elsewhere (llm.c) come without one.
func ReadTokenizerInfo(dir string) (TokenizerInfo, error) {
	path := filepath.Join(dir, TokenizerInfoFile)
	b, err := regularfile.Read("tokenizer info", path, maxTokenizerInfoBytes)
	if err != nil {
		return TokenizerInfo{}, err
	}
	return ParseTokenizerInfo(path, b)
}

// ParseTokenizerInfo decodes and validates the content of a tokenizer.json;
// path names it in errors. The file is untrusted: the tokenizer must be one
// NewTokenizer knows, and vocab_size and eot must be that tokenizer's, so a
// bad value is refused here, before a model is sized from it.
func ParseTokenizerInfo(path string, b []byte) (TokenizerInfo, error) {
	bad := func(format string, a ...any) (TokenizerInfo, error) {
		return TokenizerInfo{}, fmt.Errorf("tokenizer info %s: %s", path, fmt.Sprintf(format, a...))
	}
	var doc struct {
		TokenizerInfo
		// Hugging Face's tokenizer.json has the same name and a "model".
		HFModel json.RawMessage `json:"model"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return bad("not valid JSON: %v; gotrain data prepare writes this file, so prepare the data again", err)
	}
	info := doc.TokenizerInfo
	switch {
	case info.Tokenizer == "" && doc.HFModel != nil:
		return bad(`this is a Hugging Face tokenizer file, which gotrain does not read; gotrain data prepare writes its own tokenizer.json beside the shards`)
	case info.Tokenizer == "":
		return bad(`no "tokenizer" name (want one of %q)`, TokenizerNames())
	}
	vocab, eot, ok := knownTokenizer(info.Tokenizer)
	switch {
	case !ok:
		return bad("unknown tokenizer %q (known: %q)", info.Tokenizer, TokenizerNames())
	case info.VocabSize != vocab:
		return bad(`"vocab_size" is %d, but tokenizer %s has %d ids; fix the file or prepare the data again`, info.VocabSize, info.Tokenizer, vocab)
	case info.EOT != eot:
		return bad(`"eot" is %d, but tokenizer %s's end-of-text id is %d; fix the file or prepare the data again`, info.EOT, info.Tokenizer, eot)
	}
	return info, nil
}

// Open returns the tokenizer the info names, checking that its EOT and
// vocabulary size agree with what the file recorded (ReadTokenizerInfo has
// already checked that; an info built by hand has not).
func (i TokenizerInfo) Open() (Tokenizer, error) {
	tok, err := NewTokenizer(i.Tokenizer)
	if err != nil {
		return nil, err
	}
	var errs []error
	if i.EOT != tok.EOT() {
		errs = append(errs, fmt.Errorf("eot %d, but tokenizer %s has %d", i.EOT, i.Tokenizer, tok.EOT()))
	}
	if i.VocabSize != tok.VocabSize() {
		errs = append(errs, fmt.Errorf("vocab_size %d, but tokenizer %s has %d", i.VocabSize, i.Tokenizer, tok.VocabSize()))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("tokenizer info disagrees with the tokenizer: %w", errors.Join(errs...))
	}
	return tok, nil
}
