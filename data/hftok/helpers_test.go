package hftok

import (
	"encoding/json"
	"fmt"
	"testing"
)

// synth describes a small byte-level BPE tokenizer.json for tests: the 256
// byte characters have ids 0..255, each merge's result the next id, then the
// added tokens.
type synth struct {
	merges       [][2]string // in raw bytes, spelled byte-level in the file
	added        []map[string]any
	normalizer   any
	preTokenizer any
	post         any
	modelExtra   map[string]any
	mergeStrings bool     // write merges as "a b" strings instead of pairs
	extraVocab   []string // raw-byte entries no merge makes
}

func (s synth) json(t testing.TB) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteRune(byte(b)))] = b
	}
	var merges []any
	for _, m := range s.merges {
		a, b := byteLevel(m[0]), byteLevel(m[1])
		if _, ok := vocab[a+b]; !ok {
			vocab[a+b] = len(vocab)
		}
		if s.mergeStrings {
			merges = append(merges, a+" "+b)
		} else {
			merges = append(merges, []string{a, b})
		}
	}
	for _, e := range s.extraVocab {
		vocab[byteLevel(e)] = len(vocab)
	}
	added := []any{}
	for i, a := range s.added {
		e := map[string]any{"id": len(vocab) + i, "single_word": false, "lstrip": false, "rstrip": false,
			"normalized": false, "special": true}
		for k, v := range a {
			e[k] = v
		}
		added = append(added, e)
	}
	model := map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "fuse_unk": false,
		"byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": merges}
	for k, v := range s.modelExtra {
		model[k] = v
	}
	pre := s.preTokenizer
	if pre == nil {
		pre = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": PatternQwen2}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}}
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer": s.normalizer, "pre_tokenizer": pre, "post_processor": s.post,
		"decoder": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"model":   model,
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (s synth) load(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load(s.json(t), Config{})
	if err != nil {
		t.Fatalf("load synthetic tokenizer: %v", err)
	}
	return tok
}

// pieces runs the tokenizer's pre-tokenizer alone.
func (t *Tokenizer) pieces(s string) []string {
	cur := []string{s}
	for _, st := range t.pre {
		var next []string
		for _, p := range cur {
			if st.prefixSpace {
				if len(p) == 0 || p[0] != ' ' {
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
		cur = next
	}
	return cur
}

func quoteAll(ss []string) string { return fmt.Sprintf("%q", ss) }

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
