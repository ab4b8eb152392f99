package hftok

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Limits on tokenizer.json. The largest real files (Gemma's 262k-token
// vocabulary) are about 35 MB; these leave room while keeping a hostile
// file from sizing tables beyond what a real vocabulary needs.
const (
	MaxFileBytes   = 64 << 20
	maxVocab       = 1 << 22 // ids
	maxMerges      = 1 << 23
	maxAddedTokens = 1 << 18
	// maxAddedBytes bounds the added tokens' contents together (the trie
	// has a node per byte); real files have a few KB.
	maxAddedBytes = 4 << 20
)

// fileJSON is the part of tokenizer.json gotrain reads. Truncation and
// padding are ignored, as transformers ignores them when a call asks for
// neither.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	// Model is decoded in the same pass as the file: it is most of its
	// bytes, and a second pass over them would double the load time.
	Model *modelJSON `json:"model"`
}

type addedTokenJSON struct {
	ID         *int64  `json:"id"`
	Content    *string `json:"content"`
	SingleWord bool    `json:"single_word"`
	LStrip     bool    `json:"lstrip"`
	RStrip     bool    `json:"rstrip"`
	Normalized bool    `json:"normalized"`
	Special    bool    `json:"special"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int64 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// typed is the "type" every component object carries.
type typed struct {
	Type string `json:"type"`
}

// Load builds a tokenizer from the bytes of tokenizer.json and what
// ParseConfig read of tokenizer_config.json (a zero Config when there is
// none). Errors name the field at fault.
func Load(tokenizerJSON []byte, cfg Config) (*Tokenizer, error) {
	if len(tokenizerJSON) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, more than the %d a tokenizer.json may have", len(tokenizerJSON), MaxFileBytes)
	}
	var f fileJSON
	if err := json.Unmarshal(tokenizerJSON, &f); err != nil {
		// Other models (Unigram's vocab is a list) do not fit modelJSON:
		// name the type rather than the JSON mismatch.
		var probe struct {
			Model struct {
				Type string `json:"type"`
			} `json:"model"`
		}
		if json.Unmarshal(tokenizerJSON, &probe) == nil && probe.Model.Type != "" && probe.Model.Type != "BPE" {
			return nil, fmt.Errorf("model: type %q is not supported: gotrain reads BPE models only", probe.Model.Type)
		}
		return nil, fmt.Errorf("not valid JSON, or a key of the wrong type: %v", err)
	}
	if f.Model == nil {
		return nil, fmt.Errorf(`no "model": this is not a Hugging Face tokenizer.json`)
	}
	t := &Tokenizer{config: cfg}
	vocab, err := t.loadModel(f.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := t.loadAdded(f.AddedTokens, vocab); err != nil {
		return nil, fmt.Errorf("added_tokens: %w", err)
	}
	if t.nfc, err = loadNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	byteLevel := false
	if t.pre, byteLevel, err = loadPreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if !byteLevel {
		return nil, fmt.Errorf("pre_tokenizer: no ByteLevel step: gotrain reads byte-level BPE tokenizers only (GPT-2, Qwen2/Qwen3, Llama 3)")
	}
	if err := loadDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if t.post, err = t.loadPostProcessor(f.PostProcessor); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	if err := t.resolveConfig(); err != nil {
		return nil, err
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// loadModel reads the BPE model; it returns the vocabulary as written
// (byte-level strings to ids) for the added tokens' checks.
func (t *Tokenizer) loadModel(m *modelJSON) (map[string]int64, error) {
	switch {
	case m.Type != "BPE" && !(m.Type == "" && m.Merges != nil):
		return nil, fmt.Errorf("type %q is not supported: gotrain reads BPE models only", m.Type)
	case m.ByteFallback:
		return nil, fmt.Errorf("byte_fallback is true: gotrain reads byte-level BPE, where every byte is a token and no fallback exists (SentencePiece-style BPE, as Llama 2's and Mistral's, is not supported)")
	case m.Dropout != nil && *m.Dropout != 0:
		return nil, fmt.Errorf("dropout %v: BPE dropout picks merges at random, and gotrain tokenizes deterministically; set it to null", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("continuing_subword_prefix %q is not supported (byte-level BPE has none)", *m.ContinuingSubwordPrefix)
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("end_of_word_suffix %q is not supported (byte-level BPE has none)", *m.EndOfWordSuffix)
	case len(m.Vocab) == 0:
		return nil, fmt.Errorf("vocab is empty")
	case len(m.Vocab) > maxVocab:
		return nil, fmt.Errorf("vocab has %d entries, more than the %d gotrain accepts", len(m.Vocab), maxVocab)
	}
	maxID := int64(-1)
	for tok, id := range m.Vocab {
		if id < 0 || id >= maxVocab {
			return nil, fmt.Errorf("vocab: %q has id %d, outside [0, %d)", tok, id, maxVocab)
		}
		maxID = max(maxID, id)
	}
	// Ids index the decode table: a few holes are harmless, a vocabulary
	// that is mostly holes is not a real one.
	if maxID >= 2*int64(len(m.Vocab))+1024 {
		return nil, fmt.Errorf("vocab: the largest id is %d but there are only %d entries", maxID, len(m.Vocab))
	}
	t.vocab = int(maxID) + 1
	t.decoded = make([]string, t.vocab)
	t.hasToken = make([]bool, t.vocab)
	t.special = make([]bool, t.vocab)
	t.tokenID = make(map[string]int, len(m.Vocab))
	for tok, id := range m.Vocab {
		if t.hasToken[id] {
			return nil, fmt.Errorf("vocab: id %d is given to both %q and %q", id, t.tokenOf(int(id)), tok)
		}
		t.hasToken[id] = true
		t.tokenID[tok] = int(id)
		t.decoded[id] = decodeToken(tok)
	}
	b := &t.model
	b.unk = -1
	for c := range 256 {
		b.byteID[c] = -1
		if id, ok := m.Vocab[string(byteRune(byte(c)))]; ok {
			b.byteID[c] = int32(id)
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		b.unk, b.fuseUnk = int32(id), m.FuseUnk
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, fmt.Errorf("merges: %w", err)
	}
	b.merges = make(map[uint64]merge, len(merges))
	for i, mg := range merges {
		a, ok1 := m.Vocab[mg[0]]
		c, ok2 := m.Vocab[mg[1]]
		n, ok3 := m.Vocab[mg[0]+mg[1]]
		switch {
		case !ok1:
			return nil, fmt.Errorf("merges[%d]: %q is not in the vocabulary", i, mg[0])
		case !ok2:
			return nil, fmt.Errorf("merges[%d]: %q is not in the vocabulary", i, mg[1])
		case !ok3:
			return nil, fmt.Errorf("merges[%d]: the merge of %q and %q, %q, is not in the vocabulary", i, mg[0], mg[1], mg[0]+mg[1])
		}
		// A pair listed twice takes its later rank, as tokenizers' map.
		b.merges[pairKey(int32(a), int32(c))] = merge{rank: int32(i), id: int32(n)}
	}
	if m.IgnoreMerges {
		b.whole = make(map[string]int32, len(m.Vocab))
		for tok, id := range m.Vocab {
			if raw, ok := unByteLevel(tok); ok {
				b.whole[raw] = int32(id)
			}
		}
	}
	b.cache = newWordCache()
	return m.Vocab, nil
}

// tokenID2 finds the token string of id, for an error message.
func (t *Tokenizer) tokenOf(id int) string {
	for s, i := range t.tokenID {
		if i == id {
			return s
		}
	}
	return ""
}

// decodeToken is what the ByteLevel decoder makes of one token: the bytes
// its characters spell, or, when some character is not one of the 256, the
// token's own UTF-8 (tokenizers' decoders/byte_level.rs).
func decodeToken(tok string) string {
	if raw, ok := unByteLevel(tok); ok {
		return raw
	}
	return tok
}

// parseMerges reads merges in either form tokenizers writes: strings "a b"
// (split on the one space; "#version" lines skipped and not ranked) or
// pairs ["a", "b"].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] != '[' {
		return nil, fmt.Errorf("want a list")
	}
	rest := bytes.TrimSpace(raw[1:])
	if len(rest) > 0 && rest[0] == '[' {
		var pairs [][]string
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, fmt.Errorf("want a list of [\"a\", \"b\"] pairs: %v", err)
		}
		if len(pairs) > maxMerges {
			return nil, fmt.Errorf("%d merges, more than the %d gotrain accepts", len(pairs), maxMerges)
		}
		out := make([][2]string, len(pairs))
		for i, p := range pairs {
			if len(p) != 2 {
				return nil, fmt.Errorf("merges[%d] has %d parts, want 2", i, len(p))
			}
			out[i] = [2]string{p[0], p[1]}
		}
		return out, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("want a list of \"a b\" strings or of [\"a\", \"b\"] pairs: %v", err)
	}
	if len(lines) > maxMerges {
		return nil, fmt.Errorf("%d merges, more than the %d gotrain accepts", len(lines), maxMerges)
	}
	out := make([][2]string, 0, len(lines))
	for i, l := range lines {
		if strings.HasPrefix(l, "#version") {
			continue
		}
		a, b, ok := strings.Cut(l, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, fmt.Errorf("merges[%d] is %q: want two symbols separated by one space", i, l)
		}
		out = append(out, [2]string{a, b})
	}
	return out, nil
}

// loadAdded checks the added tokens against the vocabulary and builds their
// matchers. Ids are taken from the file; one that disagrees with the
// vocabulary (tokenizers would renumber it, with a warning) is refused.
func (t *Tokenizer) loadAdded(list []addedTokenJSON, vocab map[string]int64) error {
	if len(list) > maxAddedTokens {
		return fmt.Errorf("%d tokens, more than the %d gotrain accepts", len(list), maxAddedTokens)
	}
	seen := make(map[string]int, len(list))
	var raw, normalized []AddedToken
	total := 0
	for i, a := range list {
		switch {
		case a.ID == nil || a.Content == nil:
			return fmt.Errorf("[%d] lacks an id or a content", i)
		case *a.Content == "":
			return fmt.Errorf("[%d] (id %d) has empty content", i, *a.ID)
		case *a.ID < 0 || *a.ID >= maxVocab:
			return fmt.Errorf("[%d] %q has id %d, outside [0, %d)", i, *a.Content, *a.ID, maxVocab)
		}
		id, content := int(*a.ID), *a.Content
		if total += len(content); total > maxAddedBytes {
			return fmt.Errorf("the contents of the first %d tokens add up to more than the %d bytes gotrain accepts", i+1, maxAddedBytes)
		}
		if j, dup := seen[content]; dup {
			return fmt.Errorf("[%d] %q is already added_tokens[%d]", i, content, j)
		}
		seen[content] = i
		if vid, ok := vocab[content]; ok {
			if int(vid) != id {
				return fmt.Errorf("[%d] %q has id %d, but the vocabulary gives it %d", i, content, id, vid)
			}
		} else if id < t.vocab && t.hasToken[id] {
			return fmt.Errorf("[%d] %q has id %d, which %q has already", i, content, id, t.tokenOf(id))
		}
		if id >= t.vocab {
			if id >= 2*(len(vocab)+len(list))+1024 {
				return fmt.Errorf("[%d] %q has id %d, far beyond the %d tokens", i, content, id, len(vocab)+len(list))
			}
			t.grow(id + 1)
		}
		tok := AddedToken{ID: id, Content: content, SingleWord: a.SingleWord, LStrip: a.LStrip, RStrip: a.RStrip,
			Normalized: a.Normalized, Special: a.Special}
		t.hasToken[id] = true
		t.decoded[id] = decodeToken(content)
		t.special[id] = a.Special
		t.tokenID[content] = id
		t.addedTokens = append(t.addedTokens, tok)
		if tok.Normalized {
			normalized = append(normalized, tok)
		} else {
			raw = append(raw, tok)
		}
	}
	t.added = newAddedMatcher(raw)
	t.addedNorm = newAddedMatcher(normalized)
	return nil
}

// grow extends the id tables to n ids.
func (t *Tokenizer) grow(n int) {
	more := n - t.vocab
	t.decoded = append(t.decoded, make([]string, more)...)
	t.hasToken = append(t.hasToken, make([]bool, more)...)
	t.special = append(t.special, make([]bool, more)...)
	t.vocab = n
}

func loadNormalizer(raw json.RawMessage) (nfc bool, err error) {
	if isNull(raw) {
		return false, nil
	}
	var n struct {
		typed
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return false, fmt.Errorf("not a normalizer object: %v", err)
	}
	switch n.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		for i, sub := range n.Normalizers {
			ok, err := loadNormalizer(sub)
			if err != nil {
				return false, fmt.Errorf("normalizers[%d]: %w", i, err)
			}
			nfc = nfc || ok
		}
		return nfc, nil
	}
	return false, fmt.Errorf("%q is not supported: gotrain reads the NFC normalizer only", n.Type)
}

// loadPreTokenizer reads a pre-tokenizer into steps; byteLevel reports a
// ByteLevel step, which makes the model byte-level.
func loadPreTokenizer(raw json.RawMessage) (steps []preStep, byteLevel bool, err error) {
	if isNull(raw) {
		return nil, false, nil
	}
	var p struct {
		typed
		PreTokenizers  []json.RawMessage `json:"pretokenizers"`
		AddPrefixSpace bool              `json:"add_prefix_space"`
		UseRegex       *bool             `json:"use_regex"`
		Pattern        struct {
			Regex  *string `json:"Regex"`
			String *string `json:"String"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, false, fmt.Errorf("not a pre-tokenizer object: %v", err)
	}
	switch p.Type {
	case "Sequence":
		for i, sub := range p.PreTokenizers {
			s, bl, err := loadPreTokenizer(sub)
			if err != nil {
				return nil, false, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			steps, byteLevel = append(steps, s...), byteLevel || bl
		}
		return steps, byteLevel, nil
	case "ByteLevel":
		if p.AddPrefixSpace {
			steps = append(steps, preStep{prefixSpace: true})
		}
		// use_regex defaults to true (tokenizers' serde default).
		if p.UseRegex == nil || *p.UseRegex {
			steps = append(steps, preStep{scan: scanGPT2})
		}
		return steps, true, nil
	case "Split":
		switch {
		case p.Pattern.Regex == nil:
			s := "no pattern"
			if p.Pattern.String != nil {
				s = fmt.Sprintf("the string pattern %q", *p.Pattern.String)
			}
			return nil, false, fmt.Errorf("Split with %s is not supported: gotrain reads the regex patterns of Qwen2/Qwen3, Llama 3 and GPT-2", s)
		case p.Behavior != "Isolated":
			return nil, false, fmt.Errorf("Split behavior %q is not supported (only Isolated)", p.Behavior)
		case p.Invert:
			return nil, false, fmt.Errorf("Split with invert true is not supported")
		}
		scan, ok := scannerFor(*p.Pattern.Regex)
		if !ok {
			return nil, false, fmt.Errorf("Split pattern %q is not one gotrain reads: it implements exactly the patterns of Qwen2/Qwen3 %q, Llama 3 %q and GPT-2 %q",
				*p.Pattern.Regex, PatternQwen2, PatternLlama3, PatternGPT2)
		}
		return []preStep{{scan: scan}}, false, nil
	}
	return nil, false, fmt.Errorf("%q is not supported: gotrain reads Split, ByteLevel and Sequence", p.Type)
}

func loadDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("none: gotrain decodes byte-level BPE and needs the ByteLevel decoder")
	}
	var d struct {
		typed
		Decoders []json.RawMessage `json:"decoders"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("not a decoder object: %v", err)
	}
	switch d.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		if len(d.Decoders) != 1 {
			return fmt.Errorf("a Sequence of %d decoders is not supported (only of one ByteLevel)", len(d.Decoders))
		}
		if err := loadDecoder(d.Decoders[0]); err != nil {
			return fmt.Errorf("decoders[0]: %w", err)
		}
		return nil
	}
	return fmt.Errorf("%q is not supported: gotrain reads the ByteLevel decoder", d.Type)
}

// resolveConfig gives the special tokens named by tokenizer_config.json
// their ids; one that is no token of tokenizer.json is an error (transformers
// would add it as a new token, which would change the vocabulary).
func (t *Tokenizer) resolveConfig() error {
	for _, f := range []struct {
		key string
		s   *Special
	}{{"bos_token", &t.config.BOS}, {"eos_token", &t.config.EOS}, {"pad_token", &t.config.PAD}, {"unk_token", &t.config.UNK}} {
		f.s.ID = -1
		if f.s.Content == "" {
			continue
		}
		id, ok := t.tokenID[f.s.Content]
		if !ok {
			return fmt.Errorf("tokenizer_config.json: %s %q is not a token of tokenizer.json", f.key, f.s.Content)
		}
		f.s.ID = id
	}
	return nil
}
