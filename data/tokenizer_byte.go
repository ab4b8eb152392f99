package data

import "strings"

// ByteTokenizer maps each UTF-8 byte of the text to its value 0..255; EOT is
// 256. It needs no vocabulary file, which makes it the tokenizer of tiny runs
// and tests.
type ByteTokenizer struct{}

// NewByteTokenizer returns the byte tokenizer.
func NewByteTokenizer() ByteTokenizer { return ByteTokenizer{} }

const byteEOT = 256

// Encode returns the bytes of text.
func (ByteTokenizer) Encode(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = int(text[i])
	}
	return ids
}

// Decode turns bytes back into text. EOT becomes "<|endoftext|>" as GPT-2's
// tokenizer writes it; ids outside the vocabulary become U+FFFD.
func (ByteTokenizer) Decode(ids []int) string {
	var sb strings.Builder
	sb.Grow(len(ids))
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			sb.WriteByte(byte(id))
		case id == byteEOT:
			sb.WriteString("<|endoftext|>")
		default:
			sb.WriteRune('\uFFFD')
		}
	}
	return sb.String()
}

// EOT is 256.
func (ByteTokenizer) EOT() int { return byteEOT }

// VocabSize is 257.
func (ByteTokenizer) VocabSize() int { return byteEOT + 1 }

// Name is "byte".
func (ByteTokenizer) Name() string { return "byte" }
