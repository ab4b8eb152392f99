package hftok

import (
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a loaded byte-level BPE tokenizer. It is immutable and safe
// for concurrent use.
type Tokenizer struct {
	model bpe
	// added holds the added tokens matched in raw text, addedNorm those
	// matched in normalized text (normalized: true).
	added, addedNorm *addedMatcher
	addedTokens      []AddedToken // in file order
	nfc              bool
	pre              []preStep
	post             []postStep
	// decoded[id] is the bytes token id decodes to; hasToken[id] is false
	// for ids no token has.
	decoded  []string
	hasToken []bool
	special  []bool // decoded ids dropped when special tokens are skipped
	// tokenID maps vocabulary entries as the file spells them (byte-level
	// characters) and added tokens' contents to their ids.
	tokenID map[string]int
	vocab   int
	config  Config
	scratch sync.Pool
}

// EncodeOptions choose between the two behaviours of transformers'
// tokenizer(text).
type EncodeOptions struct {
	// AddSpecialTokens runs the post-processor's template, which adds BOS
	// (Llama 3's current files) or BOS and EOS; transformers' default.
	AddSpecialTokens bool
	// SplitSpecialTokens encodes special tokens written in the text as
	// ordinary text (transformers' split_special_tokens=True); non-special
	// added tokens such as <think> are still matched.
	SplitSpecialTokens bool
}

// preStep is one pre-tokenizer: a Split (or ByteLevel with use_regex) with a
// scanner, or ByteLevel's add_prefix_space.
type preStep struct {
	scan        scanner
	prefixSpace bool
}

// Encode tokenizes text: added tokens, then per piece NFC (if the file
// asks), pre-tokenization and BPE, then the post-processor when
// opts.AddSpecialTokens. Bytes that are not UTF-8 are encoded as themselves
// (the library itself accepts only UTF-8).
func (t *Tokenizer) Encode(text string, opts EncodeOptions) []int {
	sc, _ := t.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	defer t.scratch.Put(sc)
	ids := make([]int, 0, len(text)/3+4)
	for _, seg := range t.added.split(text, opts.SplitSpecialTokens, nil) {
		if seg.id >= 0 {
			ids = append(ids, int(seg.id))
			continue
		}
		s := seg.text
		if t.nfc {
			s = nfc(s)
		}
		for _, seg2 := range t.addedNorm.split(s, opts.SplitSpecialTokens, nil) {
			if seg2.id >= 0 {
				ids = append(ids, int(seg2.id))
				continue
			}
			ids = t.encodePiece(ids, seg2.text, sc)
		}
	}
	if opts.AddSpecialTokens {
		for _, p := range t.post {
			ids = p.apply(ids)
		}
	}
	return ids
}

// encodePiece pre-tokenizes text that holds no added token and appends the
// BPE ids of each pre-token.
func (t *Tokenizer) encodePiece(ids []int, s string, sc *scratch) []int {
	if s == "" {
		return ids
	}
	cur := append(sc.pieces[0][:0], s)
	next := sc.pieces[1][:0]
	for _, st := range t.pre {
		next = next[:0]
		for _, p := range cur {
			if st.prefixSpace {
				if !strings.HasPrefix(p, " ") {
					p = " " + p
				}
				next = append(next, p)
				continue
			}
			for i := 0; i < len(p); {
				j := st.scan(p, i)
				next = append(next, p[i:j])
				i = j
			}
		}
		cur, next = next, cur
	}
	for _, w := range cur {
		ids = t.model.appendWord(ids, w, sc)
	}
	sc.pieces[0], sc.pieces[1] = cur[:0], next[:0]
	return ids
}

// nfc is Unicode NFC; ASCII is already in NFC and skips the check. Bytes
// that are not UTF-8 pass through unchanged.
func nfc(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return norm.NFC.String(s)
		}
	}
	return s
}

// Decode turns ids back into text as the ByteLevel decoder does: the bytes
// of every token, concatenated, read as UTF-8 with each maximal invalid
// subsequence replaced by U+FFFD. Ids that are no token are left out, as
// tokenizers does; skipSpecial also leaves out special added tokens.
// transformers' clean_up_tokenization_spaces is not applied (see
// CleanUpTokenizationSpaces).
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	return lossyUTF8(t.DecodeBytes(ids, skipSpecial))
}

// DecodeBytes is Decode before the UTF-8 repair: the exact bytes the tokens
// spell, so that text with bytes that are not UTF-8 comes back unchanged.
func (t *Tokenizer) DecodeBytes(ids []int, skipSpecial bool) []byte {
	var b []byte
	for _, id := range ids {
		if !t.IsToken(id) || (skipSpecial && t.special[id]) {
			continue
		}
		b = append(b, t.decoded[id]...)
	}
	return b
}

// IsToken reports whether some token has id.
func (t *Tokenizer) IsToken(id int) bool { return id >= 0 && id < len(t.hasToken) && t.hasToken[id] }

// IsSpecial reports whether id is a special added token.
func (t *Tokenizer) IsSpecial(id int) bool { return t.IsToken(id) && t.special[id] }

// TokenID returns the id of a vocabulary entry or added token, written as
// in tokenizer.json (byte-level characters for vocabulary entries: "Ġthe").
func (t *Tokenizer) TokenID(token string) (int, bool) {
	id, ok := t.tokenID[token]
	return id, ok
}

// VocabSize is the number of ids: one more than the largest id of the
// vocabulary and the added tokens (Qwen3: 151,669; Llama 3: 128,256).
func (t *Tokenizer) VocabSize() int { return t.vocab }

// AddedTokens lists the added tokens in the file's order.
func (t *Tokenizer) AddedTokens() []AddedToken { return append([]AddedToken(nil), t.addedTokens...) }

// Config is what tokenizer_config.json said (zero when there was none).
func (t *Tokenizer) Config() Config { return t.config }

// TemplatePrefix returns the ids the post-processor puts before a single
// sequence when special tokens are added (Llama 3's current files:
// [128000]); empty when it adds none there.
func (t *Tokenizer) TemplatePrefix() []int {
	var ids []int
	for _, p := range t.post {
		// A later step wraps what the earlier ones made.
		ids = append(append([]int(nil), p.before...), ids...)
	}
	return ids
}

// lossyUTF8 is Rust's String::from_utf8_lossy: valid UTF-8 is kept, and
// every maximal prefix of a valid sequence that breaks off (and every byte
// that starts none) becomes one U+FFFD (Unicode's "substitution of maximal
// subparts", which JavaScript's TextDecoder also follows). Go's
// strings.ToValidUTF8 would merge a run of bad bytes into one U+FFFD.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for len(b) > 0 {
		r, w := utf8.DecodeRune(b)
		if r != utf8.RuneError || w > 1 {
			sb.Write(b[:w])
			b = b[w:]
			continue
		}
		sb.WriteRune(utf8.RuneError)
		b = b[maximalSubpart(b):]
	}
	return sb.String()
}

// maximalSubpart is the length of the longest prefix of b that starts a
// well-formed UTF-8 sequence (at least 1), b being invalid at its start.
func maximalSubpart(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF)
	var need int
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}

// CleanUpTokenizationSpaces is transformers' clean_up_tokenization, which
// its decode applies when tokenizer_config.json's
// clean_up_tokenization_spaces is true (Llama 3): it removes the space
// before . ? ! , and some contractions. It loses text (" ." cannot come
// back), so Decode leaves it to the caller.
func CleanUpTokenizationSpaces(s string) string {
	// One replacement after the other, as Python's chained str.replace.
	for _, r := range [][2]string{
		{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
		{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
	} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}
