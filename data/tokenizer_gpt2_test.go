package data

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pkoukk/tiktoken-go"
)

// tiktokenGPT2 is tiktoken-go's own r50k_base, the reference that gotrain's
// GPT-2 tokenizer must equal id for id.
func tiktokenGPT2(t *testing.T) *tiktoken.Tiktoken {
	t.Helper()
	if _, err := NewGPT2Tokenizer(); err != nil { // sets the offline loader
		t.Fatal(err)
	}
	enc, err := tiktoken.GetEncoding(tiktoken.MODEL_R50K_BASE)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// GPT-2 is tokenized by hftok's scanner and merge loop over tiktoken's
// ranks; tiktoken-go (regexp2 and its own merge loop) is the reference, on
// the hostile corpus, Go sources, and random text with every character
// class, invalid UTF-8 and spelled special tokens.
func TestGPT2MatchesTiktoken(t *testing.T) {
	ref := tiktokenGPT2(t)
	tok, err := NewGPT2Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	corpus := string(mustRead(t, filepath.Join("testdata", "tokenizer_corpus.txt")))
	texts := append(strings.Split(corpus, "\n"), corpus)
	for _, f := range []string{"prepare.go", "loader.go", "shard_format.go"} {
		texts = append(texts, string(mustRead(t, f)))
	}
	alphabet := []string{"a", "Z", "é", "中", "1", "٣", " ", "  ", "\t", "\n", "\r", "\u00a0", "'", "s", "re", "ll",
		"!", ",", "🤗", "\u0301", "_", "\xff", "\xe4\xb8", "<|endoftext|>", "<|endoftext", "the", " of", "ing"}
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		var sb strings.Builder
		for range r.IntN(30) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		texts = append(texts, sb.String())
	}
	for _, s := range texts {
		if got, want := tok.Encode(s), ref.EncodeOrdinary(s); !slices.Equal(got, want) {
			t.Fatalf("%q:\n got %v\nwant %v", s, got, want)
		}
		if got, want := EncodeWith(tok, s, EncodeOptions{MatchSpecialTokens: true}), ref.Encode(s, []string{"all"}, nil); !slices.Equal(got, want) {
			t.Fatalf("%q matching special tokens:\n got %v\nwant %v", s, got, want)
		}
		ids := tok.Encode(s)
		if got, want := tok.Decode(ids), ref.Decode(ids); got != want {
			t.Fatalf("decode of %q: %q, want %q", s, got, want)
		}
	}
}
