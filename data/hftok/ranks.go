package hftok

import "fmt"

// NewRankBPE builds a tokenizer from tiktoken-style ranks instead of a
// tokenizer.json: tokens[id] is the bytes of token id, and ids are ranks.
// tiktoken's BPE merges, at each step, the adjacent pair whose
// concatenation is the token of lowest rank (the leftmost among equals),
// and first takes a whole pre-token that is itself a token as that one id.
// That is this package's merge loop with a merge for every way to cut a
// token into two tokens, ranked by the whole token, plus ignore_merges. The
// text is pre-tokenized by pattern (one of the Pattern constants) and
// specials are matched as added tokens.
func NewRankBPE(tokens []string, pattern string, specials []AddedToken) (*Tokenizer, error) {
	scan, ok := scannerFor(pattern)
	if !ok {
		return nil, fmt.Errorf("pattern %q is not one gotrain reads", pattern)
	}
	if len(tokens) == 0 || len(tokens) > maxVocab {
		return nil, fmt.Errorf("%d tokens: want 1 to %d", len(tokens), maxVocab)
	}
	t := &Tokenizer{pre: []preStep{{scan: scan}}, config: Config{BOS: Special{ID: -1}, EOS: Special{ID: -1}, PAD: Special{ID: -1}, UNK: Special{ID: -1}}}
	t.vocab = len(tokens)
	t.decoded = append([]string(nil), tokens...)
	t.hasToken = make([]bool, t.vocab)
	t.special = make([]bool, t.vocab)
	t.tokenID = make(map[string]int, len(tokens))
	b := &t.model
	b.unk = -1
	b.whole = make(map[string]int32, len(tokens))
	for id, tok := range tokens {
		if tok == "" {
			return nil, fmt.Errorf("token %d is empty", id)
		}
		if _, dup := b.whole[tok]; dup {
			return nil, fmt.Errorf("token %d (%q) appears twice", id, tok)
		}
		b.whole[tok] = int32(id)
		t.hasToken[id] = true
		t.tokenID[byteLevel(tok)] = id
	}
	for c := range 256 {
		b.byteID[c] = -1
		if id, ok := b.whole[string([]byte{byte(c)})]; ok {
			b.byteID[c] = id
		}
	}
	b.merges = make(map[uint64]merge, 4*len(tokens))
	for id, tok := range tokens {
		for k := 1; k < len(tok); k++ {
			l, okl := b.whole[tok[:k]]
			r, okr := b.whole[tok[k:]]
			if okl && okr {
				b.merges[pairKey(l, r)] = merge{rank: int32(id), id: int32(id)}
			}
		}
	}
	b.cache = newWordCache()
	for _, s := range specials {
		if s.ID < 0 || s.ID >= maxVocab || s.Content == "" || s.ID < t.vocab && t.hasToken[s.ID] {
			return nil, fmt.Errorf("special token %q: id %d is taken or out of range", s.Content, s.ID)
		}
		if s.ID >= t.vocab {
			t.grow(s.ID + 1)
		}
		t.hasToken[s.ID], t.decoded[s.ID], t.special[s.ID] = true, s.Content, s.Special
		t.tokenID[s.Content] = s.ID
		t.addedTokens = append(t.addedTokens, s)
	}
	t.added = newAddedMatcher(t.addedTokens)
	t.addedNorm = newAddedMatcher(nil)
	return t, nil
}
