package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// ReadTokenizerInfo reads dir/tokenizer.json.
func ReadTokenizerInfo(dir string) (TokenizerInfo, error) {
	path := filepath.Join(dir, TokenizerInfoFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return TokenizerInfo{}, fmt.Errorf("read tokenizer info: %w", err)
	}
	var info TokenizerInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return TokenizerInfo{}, fmt.Errorf("read tokenizer info %s: %w", path, err)
	}
	if info.Tokenizer == "" {
		return TokenizerInfo{}, fmt.Errorf("read tokenizer info %s: no \"tokenizer\" name", path)
	}
	return info, nil
}

// Open returns the tokenizer the info names, checking that its EOT and
// vocabulary size agree with what the file recorded.
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
