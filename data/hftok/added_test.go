package hftok

import (
	"fmt"
	"slices"
	"testing"
)

// show renders segments as tokenizers' own tests print them: the text, and
// the id of an added token.
func show(segs []segment) []string {
	var out []string
	for _, s := range segs {
		if s.id >= 0 {
			out = append(out, fmt.Sprintf("%q=%d", s.text, s.id))
		} else {
			out = append(out, fmt.Sprintf("%q", s.text))
		}
	}
	return out
}

// The cases of tokenizers' added_vocabulary.rs tests (can_extract_added_tokens,
// test_single_word_is_correct, test_single_word_is_unicode_correct,
// test_lstrip_unicode_space), without their lowercasing normalizer, which
// only changes the text between the tokens.
func TestAddedTokensAsTokenizers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []AddedToken
		text   string
		want   []string
	}{
		{"extract", []AddedToken{{ID: 0, Content: "my"}, {ID: 1, Content: "name"}, {ID: 2, Content: "[CLS]", Special: true}, {ID: 3, Content: "[SEP]", Special: true}},
			"[CLS] My name is Anthony [SEP]", []string{`"[CLS]"=2`, `" My "`, `"name"=1`, `" is Anthony "`, `"[SEP]"=3`}},
		{"single word", []AddedToken{{ID: 0, Content: "<mask>", SingleWord: true}},
			"<mask> My name <mask> A<mask> <mask>ony <mask>",
			[]string{`"<mask>"=0`, `" My name "`, `"<mask>"=0`, `" A<mask> <mask>ony "`, `"<mask>"=0`}},
		{"single word unicode", []AddedToken{{ID: 0, Content: "<mask>", SingleWord: true}},
			"<mask>, <mask>- ◌̰<mask>", []string{`"<mask>"=0`, `", "`, `"<mask>"=0`, `"- ◌̰<mask>"`}},
		{"lstrip rstrip unicode space", []AddedToken{{ID: 0, Content: "<mask>", SingleWord: true, LStrip: true, RStrip: true}},
			"Hi <mask> there\t<mask>\t<mask>\u2000", []string{`"Hi"`, `" <mask> "=0`, `"there"`, `"\t<mask>\t"=0`, `"<mask>\u2000"=0`}},
		// Leftmost first, then the longest of those starting there.
		{"leftmost longest", []AddedToken{{ID: 0, Content: "<|a|>"}, {ID: 1, Content: "<|a|>b"}, {ID: 2, Content: "|a|>bc"}},
			"x<|a|>bc<|a|>", []string{`"x"`, `"<|a|>b"=1`, `"c"`, `"<|a|>"=0`}},
		{"adjacent", []AddedToken{{ID: 7, Content: "<s>"}}, "<s><s>", []string{`"<s>"=7`, `"<s>"=7`}},
		{"empty", []AddedToken{{ID: 7, Content: "<s>"}}, "", nil},
	} {
		m := newAddedMatcher(tc.tokens)
		if got := show(m.split(tc.text, false, nil)); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %v\nwant %v", tc.name, got, tc.want)
		}
	}
}

// With split special tokens (transformers' split_special_tokens=True),
// special tokens are text and the search goes on after them; other added
// tokens are still found.
func TestAddedTokensSplitSpecial(t *testing.T) {
	m := newAddedMatcher([]AddedToken{{ID: 1, Content: "<|im_start|>", Special: true}, {ID: 2, Content: "<think>"}})
	got := show(m.split("a<|im_start|>b<think>c", true, nil))
	want := []string{`"a<|im_start|>b"`, `"<think>"=2`, `"c"`}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Normalized added tokens are matched after NFC, in the normalized text;
// the others in the raw text only.
func TestAddedTokensNormalized(t *testing.T) {
	s := synth{normalizer: map[string]any{"type": "NFC"}, added: []map[string]any{
		{"content": "é!", "normalized": true, "special": false},
		{"content": "ö?", "normalized": false, "special": false},
	}}
	tok := s.load(t)
	eID, _ := tok.TokenID("é!")
	oID, _ := tok.TokenID("ö?")
	if got := tok.Encode("e\u0301!", EncodeOptions{}); !slices.Equal(got, []int{eID}) {
		t.Errorf("NFD é! = %v, want [%d]", got, eID)
	}
	if got := tok.Encode("ö?", EncodeOptions{}); !slices.Equal(got, []int{oID}) {
		t.Errorf("NFC ö? = %v, want [%d]", got, oID)
	}
	if got := tok.Encode("o\u0308?", EncodeOptions{}); slices.Contains(got, oID) {
		t.Errorf("NFD ö? matched the raw-text token: %v", got)
	}
}
