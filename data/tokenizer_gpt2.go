package data

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/gotrain/gotrain/data/hftok"
)

// GPT2Tokenizer is GPT-2's byte-level BPE (tiktoken's r50k_base: 50257 ids,
// EOT 50256), loaded from the vocabulary embedded in the binary.
//
// tiktoken-go supplies the vocabulary; the tokenizing is package hftok's,
// with GPT-2's pre-tokenizer pattern and tiktoken's merge rule (see
// hftok.NewRankBPE): the same ids as tiktoken-go, whose regex engine made
// data preparation run at about 3 MB/s per core.
type GPT2Tokenizer struct {
	tok *hftok.Tokenizer
}

// gpt2OfflineOnce guards tiktoken-go's package-level loader setting (the
// library's state, not ours). Once the offline loader is set, resolving an
// encoding reads the vocabulary compiled into tiktoken-go-loader and never
// the network.
var gpt2OfflineOnce sync.Once

const (
	gpt2EOT       = 50256
	gpt2VocabSize = 50257
)

// NewGPT2Tokenizer builds the GPT-2 tokenizer. Nothing is downloaded.
func NewGPT2Tokenizer() (*GPT2Tokenizer, error) {
	gpt2OfflineOnce.Do(func() {
		tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	})
	enc, err := tiktoken.GetEncoding(tiktoken.MODEL_R50K_BASE)
	if err != nil {
		return nil, fmt.Errorf("gpt2 tokenizer: %w", err)
	}
	// r50k's ids are its ranks; decoding one id gives its bytes.
	tokens := make([]string, gpt2EOT)
	for id := range tokens {
		tokens[id] = enc.Decode([]int{id})
	}
	tok, err := hftok.NewRankBPE(tokens, hftok.PatternGPT2,
		[]hftok.AddedToken{{ID: gpt2EOT, Content: "<|endoftext|>", Special: true}})
	if err != nil {
		return nil, fmt.Errorf("gpt2 tokenizer: %w", err)
	}
	return &GPT2Tokenizer{tok: tok}, nil
}

// Encode tokenizes text as ordinary text.
func (t *GPT2Tokenizer) Encode(text string) []int {
	return t.tok.Encode(runeText(text), hftok.EncodeOptions{SplitSpecialTokens: true})
}

// runeText replaces each byte that is not UTF-8 by U+FFFD, as tiktoken-go's
// regex engine does (it reads the text as runes), so that gotrain encodes
// such text as it always has.
func runeText(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for _, r := range s {
		sb.WriteRune(r)
	}
	return sb.String()
}

// Decode turns ids back into text; EOT decodes as "<|endoftext|>".
func (t *GPT2Tokenizer) Decode(ids []int) string { return string(t.tok.DecodeBytes(ids, false)) }

// EOT is 50256.
func (t *GPT2Tokenizer) EOT() int { return gpt2EOT }

// VocabSize is 50257.
func (t *GPT2Tokenizer) VocabSize() int { return gpt2VocabSize }

// Name is "gpt2".
func (t *GPT2Tokenizer) Name() string { return "gpt2" }

func (t *GPT2Tokenizer) encodeWith(text string, o EncodeOptions) []int {
	return t.tok.Encode(runeText(text), hftok.EncodeOptions{SplitSpecialTokens: !o.MatchSpecialTokens})
}

func (t *GPT2Tokenizer) decodeSkipping(ids []int) string { return string(t.tok.DecodeBytes(ids, true)) }
