package data

// EncodeOptions are the two switches of transformers' tokenizer(text)
// that gotrain's tokenizers honour, for `gotrain tokenize` and for tests
// against reference tokenizers. Tokenizer.Encode is both off.
type EncodeOptions struct {
	// AddSpecialTokens adds what the tokenizer's post-processor adds
	// around a text (Llama 3's current files: BOS). GPT-2 and byte add
	// nothing, as GPT-2's Hugging Face tokenizer.
	AddSpecialTokens bool
	// MatchSpecialTokens turns special tokens written in the text (such
	// as "<|im_start|>" or "<|endoftext|>") into their ids, as
	// transformers does by default.
	MatchSpecialTokens bool
}

// specialTokenizer is implemented by the tokenizers of this package.
type specialTokenizer interface {
	encodeWith(text string, o EncodeOptions) []int
	decodeSkipping(ids []int) string
}

// EncodeWith tokenizes text with options; a tokenizer from outside this
// package knows no options and encodes as Encode.
func EncodeWith(tok Tokenizer, text string, o EncodeOptions) []int {
	if st, ok := tok.(specialTokenizer); ok {
		return st.encodeWith(text, o)
	}
	return tok.Encode(text)
}

// DecodeWith decodes ids, leaving out special tokens (EOT, and a Hugging
// Face tokenizer's special added tokens) when skipSpecial is set.
func DecodeWith(tok Tokenizer, ids []int, skipSpecial bool) string {
	if st, ok := tok.(specialTokenizer); ok && skipSpecial {
		return st.decodeSkipping(ids)
	}
	if skipSpecial {
		return tok.Decode(withoutID(ids, tok.EOT()))
	}
	return tok.Decode(ids)
}

// withoutID returns ids without any copy of id.
func withoutID(ids []int, id int) []int {
	out := make([]int, 0, len(ids))
	for _, x := range ids {
		if x != id {
			out = append(out, x)
		}
	}
	return out
}

// The byte tokenizer's EOT (256) is no byte, so text cannot spell it.
func (t ByteTokenizer) encodeWith(text string, _ EncodeOptions) []int { return t.Encode(text) }

func (t ByteTokenizer) decodeSkipping(ids []int) string { return t.Decode(withoutID(ids, byteEOT)) }
