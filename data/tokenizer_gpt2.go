package data

import (
	"fmt"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// GPT2Tokenizer is GPT-2's byte-level BPE (tiktoken's r50k_base: 50257 ids,
// EOT 50256), loaded from the vocabulary embedded in the binary.
type GPT2Tokenizer struct {
	enc *tiktoken.Tiktoken
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
	return &GPT2Tokenizer{enc: enc}, nil
}

// Encode tokenizes text as ordinary text.
func (t *GPT2Tokenizer) Encode(text string) []int { return t.enc.EncodeOrdinary(text) }

// Decode turns ids back into text; EOT decodes as "<|endoftext|>".
func (t *GPT2Tokenizer) Decode(ids []int) string { return t.enc.Decode(ids) }

// EOT is 50256.
func (t *GPT2Tokenizer) EOT() int { return gpt2EOT }

// VocabSize is 50257.
func (t *GPT2Tokenizer) VocabSize() int { return gpt2VocabSize }

// Name is "gpt2".
func (t *GPT2Tokenizer) Name() string { return "gpt2" }
