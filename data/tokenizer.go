package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gotrain/gotrain/data/hftok"
	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// Tokenizer turns text into token ids and back. Implementations are safe for
// concurrent use.
type Tokenizer interface {
	// Encode tokenizes text as ordinary text: a special token written in the
	// text (such as "<|endoftext|>") is encoded as its characters, never as
	// EOT, so a document cannot forge a document boundary (a Hugging Face
	// tokenizer still matches its non-special added tokens, such as Qwen3's
	// <think>). It does not add EOT or BOS. EncodeWith has the other
	// behaviours.
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

// TokenizerNames lists the names NewTokenizer accepts besides paths.
func TokenizerNames() []string { return []string{"gpt2", "byte"} }

// NewTokenizer returns the tokenizer spec names: "gpt2" (GPT-2 BPE, 50257
// ids), "byte" (UTF-8 bytes, 257 ids), the path of a Hugging Face
// tokenizer.json, or a directory holding a tokenizer.json (a Hugging Face
// model snapshot, or a directory gotrain data prepare or train wrote; see
// TokenizerForModelDir). The names win over a file of the same name: write
// ./gpt2 for that.
func NewTokenizer(spec string) (Tokenizer, error) {
	switch spec {
	case "gpt2":
		return NewGPT2Tokenizer()
	case "byte":
		return NewByteTokenizer(), nil
	}
	st, err := os.Stat(spec)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("unknown tokenizer %q (known: %q, the path of a Hugging Face tokenizer.json, or a directory holding one)",
			spec, TokenizerNames())
	case err != nil:
		return nil, fmt.Errorf("tokenizer %s: %w", spec, err)
	case st.IsDir():
		return TokenizerForModelDir(spec)
	}
	b, err := regularfile.Read("tokenizer", spec, hftok.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	if isHFTokenizerJSON(b) {
		return loadHF(spec, spec, b)
	}
	info, err := ParseTokenizerInfo(spec, b)
	if err != nil {
		return nil, err
	}
	return info.Open()
}

// TokenizerForModelDir returns the tokenizer of a model directory: the
// tokenizer.json of a Hugging Face snapshot (with its
// tokenizer_config.json), or the tokenizer record gotrain writes beside
// shards and trained weights. A directory without tokenizer.json is an
// error that wraps fs.ErrNotExist.
func TokenizerForModelDir(dir string) (Tokenizer, error) {
	tok, _, err := readTokenizerDir(dir, true)
	return tok, err
}

// TokenizerInfoFile is the file in a prepared directory that names its
// tokenizer, so training and sampling can find it: gotrain's own small
// record for gpt2 and byte, or, for a Hugging Face tokenizer, a copy of its
// tokenizer.json (with tokenizer_config.json beside it), which makes the
// directory a tokenizer snapshot of its own.
const TokenizerInfoFile = "tokenizer.json"

// TokenizerInfo describes a prepared directory's tokenizer: the content of
// gotrain's tokenizer.json record, or what a Hugging Face tokenizer.json
// there holds.
type TokenizerInfo struct {
	// Tokenizer is the name NewTokenizer takes; for a Hugging Face
	// tokenizer, the path it was read from.
	Tokenizer string `json:"tokenizer"`
	EOT       int    `json:"eot"`
	VocabSize int    `json:"vocab_size"`
	// SHA256 identifies a Hugging Face tokenizer (the hex SHA-256 of its
	// tokenizer.json); empty for gpt2 and byte.
	SHA256 string `json:"-"`
	// Path is the Hugging Face tokenizer.json that Open loads.
	Path string `json:"-"`
}

// InfoOf describes tok for tokenizer.json.
func InfoOf(tok Tokenizer) TokenizerInfo {
	info := TokenizerInfo{Tokenizer: tok.Name(), EOT: tok.EOT(), VocabSize: tok.VocabSize()}
	if hf, ok := tok.(*HFTokenizer); ok {
		info.SHA256, info.Path = hf.sha, hf.path
	}
	return info
}

// Same reports whether two infos describe the same tokenizer: the same
// tokenizer.json content for Hugging Face tokenizers, wherever their copies
// are, else the same name; and the same EOT and vocabulary size.
func (i TokenizerInfo) Same(o TokenizerInfo) bool {
	if i.EOT != o.EOT || i.VocabSize != o.VocabSize || i.SHA256 != o.SHA256 {
		return false
	}
	return i.SHA256 != "" || i.Tokenizer == o.Tokenizer
}

// WriteTokenizerInfo writes dir/tokenizer.json for tok, atomically: for a
// Hugging Face tokenizer its own files (tokenizer.json,
// tokenizer_config.json, chat_template.jinja), else gotrain's record.
func WriteTokenizerInfo(dir string, tok Tokenizer) error {
	if hf, ok := tok.(*HFTokenizer); ok {
		return hf.writeFiles(dir)
	}
	b, err := json.Marshal(InfoOf(tok))
	if err != nil {
		return fmt.Errorf("encode %s: %w", TokenizerInfoFile, err)
	}
	return writeFileAtomic(dir, TokenizerInfoFile, append(b, '\n'))
}

// writeFileAtomic writes dir/name through a temporary file, fsync and a
// rename, so a reader sees the old file or the new one, never part of one.
func writeFileAtomic(dir, name string, b []byte) error {
	return atomicfile.WriteFile(filepath.Join(dir, name), b)
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

// ReadTokenizerInfo reads and validates dir/tokenizer.json: gotrain's
// record (see ParseTokenizerInfo), or a Hugging Face tokenizer.json, which
// is loaded whole (with the tokenizer_config.json beside it) so that a bad
// one fails here, before a model is sized from it. A missing file is an
// error that wraps fs.ErrNotExist: shards made elsewhere (llm.c) come
// without one.
func ReadTokenizerInfo(dir string) (TokenizerInfo, error) {
	_, info, err := readTokenizerDir(dir, false)
	return info, err
}

// readTokenizerDir reads dir/tokenizer.json and, for a Hugging Face one (or
// with open), builds its tokenizer.
func readTokenizerDir(dir string, open bool) (Tokenizer, TokenizerInfo, error) {
	path := filepath.Join(dir, TokenizerInfoFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, TokenizerInfo{}, fmt.Errorf("tokenizer info: %s has no %s (a Hugging Face model snapshot has one, "+
			"and so has a directory gotrain data prepare or train wrote): %w", dir, TokenizerInfoFile, err)
	}
	b, err := regularfile.Read("tokenizer info", path, hftok.MaxFileBytes)
	if err != nil {
		return nil, TokenizerInfo{}, err
	}
	if isHFTokenizerJSON(b) {
		hf, err := loadHF(dir, path, b)
		if err != nil {
			return nil, TokenizerInfo{}, err
		}
		return hf, InfoOf(hf), nil
	}
	if len(b) > maxTokenizerInfoBytes {
		return nil, TokenizerInfo{}, fmt.Errorf("tokenizer info %s is %d bytes, more than the %d gotrain's record can be, and not a Hugging Face tokenizer.json",
			path, len(b), maxTokenizerInfoBytes)
	}
	info, err := ParseTokenizerInfo(path, b)
	if err != nil || !open {
		return nil, info, err
	}
	tok, err := info.Open()
	return tok, info, err
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
		return bad(`this is a Hugging Face tokenizer file, not gotrain's record: read it with ReadTokenizerInfo on its directory (or --tokenizer PATH)`)
	case info.Tokenizer == "" && len(hfTokenizerKeys(b)) > 0:
		return TokenizerInfo{}, fmt.Errorf(`tokenizer %s is a Hugging Face tokenizer.json (it has %q) without its "model" section, which holds the vocabulary and merges: the file is incomplete or damaged; copy tokenizer.json again from the model snapshot`,
			path, hfTokenizerKeys(b))
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
// vocabulary size (and, for a Hugging Face tokenizer, its tokenizer.json)
// agree with what the info recorded (ReadTokenizerInfo has already checked
// that; an info built by hand, or a file changed since, has not).
func (i TokenizerInfo) Open() (Tokenizer, error) {
	var tok Tokenizer
	var err error
	if i.SHA256 != "" {
		var hf *HFTokenizer
		if hf, err = LoadHFTokenizer(i.Path); err == nil && hf.sha != i.SHA256 {
			return nil, fmt.Errorf("tokenizer %s changed since it was read (SHA-256 %s, was %s)", i.Path, hf.sha, i.SHA256)
		}
		tok = hf
	} else {
		tok, err = NewTokenizer(i.Tokenizer)
	}
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
