package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// scanChunkBytes is how much of a shard body one read covers while its
// tokens are checked against a vocabulary; a multiple of both token widths.
const scanChunkBytes = 1 << 20

// checkShardVocab makes sure every token id of the shard is below vocab, so
// that a shard made with another tokenizer fails when the loader is built,
// naming the file and the offset, instead of many steps into training.
// The header's max-token record answers without reading the tokens; shards
// without one (llm.c's), or whose record is not below vocab, are scanned,
// and the scan finds the first offending token. uint16 shards need no check
// at all when the vocabulary has more than 65,535 ids.
func checkShardVocab(path string, r io.ReaderAt, h ShardHeader, vocab int64) error {
	if vocab > h.Format.MaxToken() || (h.HasMaxToken && h.MaxToken < vocab) {
		return nil
	}
	w := int64(h.Format.TokenBytes())
	buf := make([]byte, min(scanChunkBytes, h.NumTokens*w))
	for done := int64(0); done < h.NumTokens; {
		n := min(int64(len(buf))/w, h.NumTokens-done)
		b := buf[:n*w]
		if _, err := r.ReadAt(b, ShardHeaderBytes+done*w); err != nil {
			if errors.Is(err, io.EOF) {
				return shardErr(path, "truncated while its tokens were checked: the file shrank after its header was read")
			}
			return fmt.Errorf("token shard %s: check tokens: %w", path, err)
		}
		if i, id := firstOutside(b, w, vocab); i >= 0 {
			return vocabError(path, done+i, w, id, vocab, "")
		}
		done += n
	}
	return nil
}

// firstOutside returns the index and value of the first little-endian token
// of width w in b that is not below vocab, or -1.
func firstOutside(b []byte, w, vocab int64) (int64, int64) {
	if w == 2 {
		for i := 0; i+1 < len(b); i += 2 {
			if id := int64(binary.LittleEndian.Uint16(b[i:])); id >= vocab {
				return int64(i / 2), id
			}
		}
		return -1, 0
	}
	for i := 0; i+3 < len(b); i += 4 {
		if id := int64(binary.LittleEndian.Uint32(b[i:])); id >= vocab {
			return int64(i / 4), id
		}
	}
	return -1, 0
}

// vocabError names the file, the token's position (in tokens and bytes) and
// the two ways out. why, when not empty, explains how the id got past the
// check at construction.
func vocabError(path string, pos, w, id, vocab int64, why string) error {
	return shardErr(path, "token id %d at token offset %d (byte %d) is outside the model's vocabulary [0, %d)%s: "+
		"the shard was made with a larger tokenizer than the model's; prepare the data with the model's tokenizer, "+
		"or use a model whose vocab_size is above %d",
		id, pos, ShardHeaderBytes+pos*w, vocab, why, id)
}
