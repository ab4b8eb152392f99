package data

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gotrain/gotrain/data/hftok"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// The files of a Hugging Face tokenizer, in a model snapshot directory and,
// copied by Prepare, beside the shards it was used for.
const (
	HFTokenizerFile    = "tokenizer.json"
	HFConfigFile       = "tokenizer_config.json"
	HFChatTemplateFile = "chat_template.jinja" // where newer transformers save the chat template
)

// HFTokenizer is a Hugging Face tokenizer.json (byte-level BPE: GPT-2,
// Qwen2/Qwen3, Llama 3), read by package hftok, with the
// tokenizer_config.json beside it.
type HFTokenizer struct {
	tok  *hftok.Tokenizer
	name string // the path it was loaded from, as given
	path string // its tokenizer.json
	sha  string // SHA-256 of tokenizer.json
	eot  int
	// files are copied beside the shards (WriteTokenizerInfo):
	// tokenizer.json first, then the config and template when present.
	files []hfFile
}

type hfFile struct {
	name string
	data []byte
}

// LoadHFTokenizer reads a Hugging Face tokenizer from path: a tokenizer.json
// file, or a directory holding one (a model snapshot). tokenizer_config.json
// and chat_template.jinja beside it are read when present; the first names
// BOS, EOS and PAD, which decide the document separator (see EOT).
func LoadHFTokenizer(path string) (*HFTokenizer, error) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, HFTokenizerFile)
	}
	b, err := regularfile.Read("Hugging Face tokenizer", file, hftok.MaxFileBytes)
	if err != nil {
		return nil, err
	}
	return loadHF(path, file, b)
}

// loadHF builds the tokenizer from the bytes of file (already read).
func loadHF(name, file string, b []byte) (*HFTokenizer, error) {
	dir := filepath.Dir(file)
	t := &HFTokenizer{name: name, path: file, files: []hfFile{{HFTokenizerFile, b}}}
	var cfg hftok.Config
	cpath := filepath.Join(dir, HFConfigFile)
	cb, err := readOptional("Hugging Face tokenizer config", cpath, hftok.MaxConfigBytes)
	if err != nil {
		return nil, err
	}
	if cb != nil {
		if cfg, err = hftok.ParseConfig(cb); err != nil {
			return nil, fmt.Errorf("Hugging Face tokenizer config %s: %w", cpath, err)
		}
		t.files = append(t.files, hfFile{HFConfigFile, cb})
	}
	tpath := filepath.Join(dir, HFChatTemplateFile)
	tb, err := readOptional("chat template", tpath, hftok.MaxConfigBytes)
	if err != nil {
		return nil, err
	}
	if tb != nil {
		if cfg.ChatTemplate == "" {
			cfg.ChatTemplate = string(tb)
		}
		t.files = append(t.files, hfFile{HFChatTemplateFile, tb})
	}
	if t.tok, err = hftok.Load(b, cfg); err != nil {
		return nil, fmt.Errorf("Hugging Face tokenizer %s: %w", file, err)
	}
	if t.eot, err = documentSeparator(t.tok); err != nil {
		return nil, fmt.Errorf("Hugging Face tokenizer %s: %w", file, err)
	}
	sum := sha256.Sum256(b)
	t.sha = hex.EncodeToString(sum[:])
	return t, nil
}

// readOptional reads a small file that may be absent (nil, nil).
func readOptional(what, path string, limit int64) ([]byte, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return regularfile.Read(what, path, limit)
}

// documentSeparator picks the id that Prepare puts before every document.
// It is the BOS token when the tokenizer has one (tokenizer_config.json's
// bos_token, else the first token the post-processor puts before a
// sequence): Llama 3's <|begin_of_text|>, which is what transformers'
// tokenizer(text) starts every document with and what llm.c's Llama 3
// shards separate documents by. Without a BOS it is <|endoftext|> when that
// is a special token (Qwen's, GPT-2's: the end-of-document token of their
// pretraining), else the eos_token.
func documentSeparator(t *hftok.Tokenizer) (int, error) {
	cfg := t.Config()
	if cfg.BOS.ID >= 0 {
		return cfg.BOS.ID, nil
	}
	if pre := t.TemplatePrefix(); len(pre) > 0 {
		return pre[0], nil
	}
	if id, ok := t.TokenID("<|endoftext|>"); ok && t.IsSpecial(id) {
		return id, nil
	}
	if cfg.EOS.ID >= 0 {
		return cfg.EOS.ID, nil
	}
	return 0, fmt.Errorf("no BOS token, no <|endoftext|> and no eos_token, so gotrain cannot tell which token separates documents; " +
		"put the model's tokenizer_config.json (which names bos_token or eos_token) beside tokenizer.json")
}

// Encode tokenizes text as ordinary text (the Tokenizer contract): special
// tokens written in it are text, as with transformers'
// split_special_tokens=True, so a document cannot forge a document
// boundary; non-special added tokens (Qwen3's <think>) are still matched.
// No BOS/EOS is added.
func (t *HFTokenizer) Encode(text string) []int {
	return t.tok.Encode(text, hftok.EncodeOptions{SplitSpecialTokens: true})
}

// Decode turns ids back into the bytes their tokens spell, special tokens
// included and without repairing invalid UTF-8 (so text round-trips byte
// for byte, as GPT-2's tiktoken decode); ids that are no token are left
// out.
func (t *HFTokenizer) Decode(ids []int) string { return string(t.tok.DecodeBytes(ids, false)) }

// EOT is the document separator (see documentSeparator).
func (t *HFTokenizer) EOT() int { return t.eot }

// VocabSize is one more than the largest id (Qwen3: 151,669).
func (t *HFTokenizer) VocabSize() int { return t.tok.VocabSize() }

// Name is the path the tokenizer was loaded from.
func (t *HFTokenizer) Name() string { return t.name }

// HF is the underlying tokenizer: BOS/EOS/PAD, the chat template, encoding
// with options.
func (t *HFTokenizer) HF() *hftok.Tokenizer { return t.tok }

// SHA256 is the hex SHA-256 of its tokenizer.json, which identifies it.
func (t *HFTokenizer) SHA256() string { return t.sha }

func (t *HFTokenizer) encodeWith(text string, o EncodeOptions) []int {
	return t.tok.Encode(text, hftok.EncodeOptions{AddSpecialTokens: o.AddSpecialTokens, SplitSpecialTokens: !o.MatchSpecialTokens})
}

func (t *HFTokenizer) decodeSkipping(ids []int) string { return string(t.tok.DecodeBytes(ids, true)) }

// writeFiles copies the tokenizer's files into dir, each atomically, and
// removes a config or template there that this tokenizer lacks, so the
// copy reads back as the same tokenizer.
func (t *HFTokenizer) writeFiles(dir string) error {
	have := map[string]bool{}
	for _, f := range t.files[1:] {
		if err := writeFileAtomic(dir, f.name, f.data); err != nil {
			return err
		}
		have[f.name] = true
	}
	for _, name := range []string{HFConfigFile, HFChatTemplateFile} {
		if !have[name] {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the stale %s: %w", name, err)
			}
		}
	}
	// tokenizer.json last: a reader that finds it finds its config too.
	return writeFileAtomic(dir, t.files[0].name, t.files[0].data)
}

// isHFTokenizerJSON tells a Hugging Face tokenizer.json (it has "model") from
// the small tokenizer record gotrain writes (it has "tokenizer").
// hfTokenizerKeys lists the top-level keys of b that only a Hugging Face
// tokenizer.json has (gotrain's record has none of them), so a
// tokenizer.json that lost its "model" is still recognised as one.
func hfTokenizerKeys(b []byte) []string {
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		return nil
	}
	var keys []string
	for _, k := range []string{"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder"} {
		if _, ok := doc[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

func isHFTokenizerJSON(b []byte) bool {
	var doc struct {
		Model     json.RawMessage `json:"model"`
		Tokenizer json.RawMessage `json:"tokenizer"`
	}
	return json.Unmarshal(b, &doc) == nil && doc.Model != nil && doc.Tokenizer == nil
}
