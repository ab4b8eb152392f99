package data

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// ShardHeaderBytes is the size of a shard header: 256 little-endian int32.
const ShardHeaderBytes = 256 * 4

// Header words of a token shard. Words 0-2 are llm.c's (dev/data/
// data_common.py writes them, llmc/dataloader.h reads only them); llm.c
// writes the other 253 as zero. gotrain records the largest token id in
// words 3-5 so that a loader can check the shard against a vocabulary
// without reading its tokens: the marker says the record is there, and the
// token count is repeated so that a shard whose count was changed by another
// tool (and whose largest id may have changed with it) is scanned instead.
// llm.c and modded-nanogpt ignore these words, and shards without the
// marker (theirs) are scanned once when a loader opens them.
const (
	shardWordMagic     = 0
	shardWordVersion   = 1
	shardWordTokens    = 2
	shardWordMaxMarker = 3
	shardWordMaxToken  = 4
	shardWordMaxCount  = 5
)

// maxTokenMarker ("gtmx" in little-endian bytes) marks a header that records
// its largest token id.
const maxTokenMarker = 0x786d7467

// ShardFormat says how tokens are stored after the header.
type ShardFormat int

const (
	// ShardGPT2 is llm.c's GPT-2 shard: magic 20240520, version 1, uint16
	// tokens. modded-nanogpt writes the same format.
	ShardGPT2 ShardFormat = iota
	// ShardLlama3 is llm.c's Llama-3 shard: magic 20240801, version 7, uint32
	// tokens.
	ShardLlama3
)

// Magic numbers of llm.c files. Only the two shard magics are accepted as
// shards; the others let a wrong-magic error say what the file really is.
const (
	magicGPT2Shard   = 20240520
	magicLlama3Shard = 20240801
	magicModel       = 20240326
	magicDebugState  = 20240327
	magicTokenizer   = 20240328
	magicEval        = 20240522
	magicTrainState  = 20240527
)

// Magic is the header[0] value of the format.
func (f ShardFormat) Magic() int32 {
	if f == ShardLlama3 {
		return magicLlama3Shard
	}
	return magicGPT2Shard
}

// Version is the header[1] value of the format.
func (f ShardFormat) Version() int32 {
	if f == ShardLlama3 {
		return 7
	}
	return 1
}

// TokenBytes is the width of one stored token: 2 (uint16) or 4 (uint32).
func (f ShardFormat) TokenBytes() int {
	if f == ShardLlama3 {
		return 4
	}
	return 2
}

// MaxToken is the largest token id the format can store. uint32 ids are
// capped at MaxInt32 because batches carry int32 tokens.
func (f ShardFormat) MaxToken() int64 {
	if f == ShardLlama3 {
		return math.MaxInt32
	}
	return math.MaxUint16
}

// String names the format for messages.
func (f ShardFormat) String() string {
	if f == ShardLlama3 {
		return "llama3 (magic 20240801 v7, uint32 tokens)"
	}
	return "gpt2 (magic 20240520 v1, uint16 tokens)"
}

// ShardHeader is the validated header of a token shard.
type ShardHeader struct {
	Format    ShardFormat
	NumTokens int64 // header[2]; always ≥ 1 once validated
	// MaxToken is the largest token id the writer recorded (header[4]),
	// meaningful only when HasMaxToken: shards written by llm.c or by hand do
	// not record it, and a record that does not match the header is ignored.
	MaxToken    int64
	HasMaxToken bool
}

// FileBytes is the exact size a shard with this header must have.
func (h ShardHeader) FileBytes() int64 {
	return ShardHeaderBytes + int64(h.Format.TokenBytes())*h.NumTokens
}

// ShardError is a problem with one shard file. Reason says what is wrong in
// words a user can act on.
type ShardError struct {
	Path   string
	Reason string
}

func (e *ShardError) Error() string {
	return fmt.Sprintf("token shard %s: %s", e.Path, e.Reason)
}

func shardErr(path, format string, args ...any) error {
	return &ShardError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// encodeShardHeader fills the 1024-byte header for ntok tokens whose
// largest id is maxTok.
func encodeShardHeader(dst []byte, f ShardFormat, ntok, maxTok int64) {
	clear(dst[:ShardHeaderBytes])
	binary.LittleEndian.PutUint32(dst[4*shardWordMagic:], uint32(f.Magic()))
	binary.LittleEndian.PutUint32(dst[4*shardWordVersion:], uint32(f.Version()))
	binary.LittleEndian.PutUint32(dst[4*shardWordTokens:], uint32(ntok))
	binary.LittleEndian.PutUint32(dst[4*shardWordMaxMarker:], maxTokenMarker)
	binary.LittleEndian.PutUint32(dst[4*shardWordMaxToken:], uint32(maxTok))
	binary.LittleEndian.PutUint32(dst[4*shardWordMaxCount:], uint32(ntok))
}

// parseShardHeader validates the first bytes of a shard. hdr holds what could
// be read, at most ShardHeaderBytes; a shorter hdr means the file ended early.
// The magic is checked before the length so that a short file of another kind
// (a text file, say) is reported as what it is.
func parseShardHeader(path string, hdr []byte) (ShardHeader, error) {
	if len(hdr) == 0 {
		return ShardHeader{}, shardErr(path, "empty file (0 bytes); a shard starts with a %d-byte header", ShardHeaderBytes)
	}
	if len(hdr) < 4 {
		return ShardHeader{}, shardErr(path, "truncated: %d bytes, too short for a %d-byte shard header", len(hdr), ShardHeaderBytes)
	}
	magic := int32(binary.LittleEndian.Uint32(hdr))
	var f ShardFormat
	switch magic {
	case magicGPT2Shard:
		f = ShardGPT2
	case magicLlama3Shard:
		f = ShardLlama3
	default:
		return ShardHeader{}, shardErr(path, "wrong magic %d (expected %d for GPT-2 uint16 shards or %d for Llama-3 uint32 shards)%s",
			magic, magicGPT2Shard, magicLlama3Shard, magicHint(hdr))
	}
	if len(hdr) < ShardHeaderBytes {
		return ShardHeader{}, shardErr(path, "truncated header: file has %d bytes, the header alone needs %d", len(hdr), ShardHeaderBytes)
	}
	version := int32(binary.LittleEndian.Uint32(hdr[4*shardWordVersion:]))
	if version != f.Version() {
		return ShardHeader{}, shardErr(path, "unsupported version %d for magic %d (expected version %d)", version, magic, f.Version())
	}
	ntok := int64(int32(binary.LittleEndian.Uint32(hdr[4*shardWordTokens:])))
	if ntok < 0 {
		return ShardHeader{}, shardErr(path, "header token count %d is negative", ntok)
	}
	if ntok == 0 {
		return ShardHeader{}, shardErr(path, "empty shard: header token count is 0")
	}
	h := ShardHeader{Format: f, NumTokens: ntok}
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(hdr[4*i:]) }
	if word(shardWordMaxMarker) == maxTokenMarker && int64(word(shardWordMaxCount)) == ntok {
		// An id the format cannot hold is a corrupt record, not a fact
		// about the tokens: the loader then scans them instead.
		if m := int64(word(shardWordMaxToken)); m <= f.MaxToken() {
			h.MaxToken, h.HasMaxToken = m, true
		}
	}
	return h, nil
}

// checkShardSize compares the file size with what the header promises.
func checkShardSize(path string, h ShardHeader, size int64) error {
	want := h.FileBytes()
	switch {
	case size < want:
		return shardErr(path, "truncated: header says %d tokens, so expected %d bytes, found %d", h.NumTokens, want, size)
	case size > want:
		return shardErr(path, "trailing bytes: header says %d tokens (%d bytes), file has %d bytes (%d extra)", h.NumTokens, want, size, size-want)
	}
	return nil
}

// magicHint guesses what a file with a foreign magic number is, so the error
// points at the likely mix-up instead of only printing a number.
func magicHint(hdr []byte) string {
	magic := binary.LittleEndian.Uint32(hdr)
	switch magic {
	case magicModel:
		return "; this looks like an llm.c model weights file (magic 20240326), not a token shard"
	case magicDebugState:
		return "; this looks like an llm.c debug state file (magic 20240327), not a token shard"
	case magicTokenizer:
		return "; this looks like an llm.c tokenizer file (magic 20240328), not a token shard"
	case magicEval:
		return "; this looks like an llm.c eval (HellaSwag) file (magic 20240522), not a token shard"
	case magicTrainState:
		return "; this looks like an llm.c training state file (magic 20240527), not a token shard"
	case bswap32(magicGPT2Shard), bswap32(magicLlama3Shard):
		return "; this looks like a big-endian shard, but shards are little-endian"
	}
	if len(hdr) >= 4 && string(hdr[:4]) == "\x93NUM" {
		return "; this looks like a NumPy .npy file, not a token shard"
	}
	if len(hdr) > 8 && hdr[8] == '{' && binary.LittleEndian.Uint64(hdr) < 1<<32 {
		return "; this looks like a safetensors file, not a token shard"
	}
	if looksLikeText(hdr) {
		return "; this looks like a text file: turn text into shards with 'gotrain data prepare'"
	}
	return ""
}

func bswap32(v uint32) uint32 {
	return v>>24 | (v>>8)&0xff00 | (v<<8)&0xff0000 | v<<24
}

// looksLikeText reports whether the first bytes are printable UTF-8.
func looksLikeText(b []byte) bool {
	if len(b) > 256 {
		b = b[:256]
	}
	// A multi-byte rune cut by the limit is not evidence against text.
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	if len(b) == 0 || !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' {
			return false
		}
		if r == 0x7f {
			return false
		}
	}
	return true
}
