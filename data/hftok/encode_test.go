package hftok

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Special tokens are added only when asked, where the post-processor puts
// them: TemplateProcessing's pieces in order, Roberta's cls and sep.
func TestPostProcessors(t *testing.T) {
	added := []map[string]any{{"content": "<s>"}, {"content": "</s>"}}
	template := map[string]any{"type": "Sequence", "processors": []any{
		map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		map[string]any{"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"SpecialToken": map[string]any{"id": "</s>", "type_id": 0}}},
			"special_tokens": map[string]any{
				"<s>":  map[string]any{"id": "<s>", "ids": []int{256}, "tokens": []string{"<s>"}},
				"</s>": map[string]any{"id": "</s>", "ids": []int{257}, "tokens": []string{"</s>"}}}},
	}}
	roberta := map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 257}, "cls": []any{"<s>", 256}}
	for _, post := range []any{template, roberta} {
		tok := synth{added: added, post: post}.load(t)
		if got := tok.Encode("hi", EncodeOptions{}); !slices.Equal(got, []int{'h', 'i'}) {
			t.Errorf("without special tokens: %v", got)
		}
		if got := tok.Encode("hi", EncodeOptions{AddSpecialTokens: true}); !slices.Equal(got, []int{256, 'h', 'i', 257}) {
			t.Errorf("with special tokens: %v", got)
		}
		if got := tok.Encode("", EncodeOptions{AddSpecialTokens: true}); !slices.Equal(got, []int{256, 257}) {
			t.Errorf("empty text with special tokens: %v", got)
		}
		if got := tok.TemplatePrefix(); !slices.Equal(got, []int{256}) {
			t.Errorf("TemplatePrefix = %v", got)
		}
	}
}

// Post-processors in a Sequence wrap one another in order, and asking for
// the prefix twice gives the same answer (it once appended into the
// tokenizer's own slice).
func TestPostProcessorSequenceNests(t *testing.T) {
	tmpl := func(name string, id int) map[string]any {
		return map[string]any{"type": "TemplateProcessing",
			"single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": name, "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{name: map[string]any{"id": name, "ids": []int{id}, "tokens": []string{name}}}}
	}
	tok := synth{added: []map[string]any{{"content": "<a>"}, {"content": "<b>"}},
		post: map[string]any{"type": "Sequence", "processors": []any{tmpl("<a>", 256), tmpl("<b>", 257)}}}.load(t)
	for range 2 {
		if got := tok.TemplatePrefix(); !slices.Equal(got, []int{257, 256}) {
			t.Fatalf("TemplatePrefix = %v", got)
		}
	}
	if got := tok.Encode("x", EncodeOptions{AddSpecialTokens: true}); !slices.Equal(got, []int{257, 256, 'x'}) {
		t.Fatalf("Encode = %v", got)
	}
}

// ByteLevel's add_prefix_space puts a space before each piece that lacks
// one; with use_regex it then splits with GPT-2's pattern.
func TestByteLevelPreTokenizer(t *testing.T) {
	tok := synth{preTokenizer: map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true}}.load(t)
	if got := tok.pieces("hello world's"); !slices.Equal(got, []string{" hello", " world", "'s"}) {
		t.Errorf("pieces %q", got)
	}
	if got := tok.pieces(" x"); !slices.Equal(got, []string{" x"}) {
		t.Errorf("pieces %q", got)
	}
}

// NFC makes canonically equivalent text encode the same; without it, NFD
// text has its combining marks as separate bytes.
func TestNFCNormalizer(t *testing.T) {
	merges := [][2]string{{"\xc3", "\xa9"}}
	nfcTok := synth{merges: merges, normalizer: map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}}}}.load(t)
	plain := synth{merges: merges}.load(t)
	if a, b := nfcTok.Encode("cafe\u0301", EncodeOptions{}), nfcTok.Encode("café", EncodeOptions{}); !slices.Equal(a, b) {
		t.Errorf("NFC: %v vs %v", a, b)
	}
	if a, b := plain.Encode("cafe\u0301", EncodeOptions{}), plain.Encode("café", EncodeOptions{}); slices.Equal(a, b) {
		t.Errorf("no normalizer, yet NFD and NFC encode the same: %v", a)
	}
}

func TestDecode(t *testing.T) {
	tok := synth{merges: [][2]string{{" ", "x"}}, added: []map[string]any{
		{"content": "<s>", "special": true}, {"content": "<t>", "special": false}}}.load(t)
	ids := tok.Encode("<s>a x<t>", EncodeOptions{})
	if got := tok.Decode(ids, false); got != "<s>a x<t>" {
		t.Errorf("Decode = %q", got)
	}
	if got := tok.Decode(ids, true); got != "a x<t>" {
		t.Errorf("Decode skipping special tokens = %q", got)
	}
	// Ids that are no token are left out, as tokenizers does.
	if got := tok.Decode([]int{'a', -1, 1 << 30, 'b'}, false); got != "ab" {
		t.Errorf("Decode with unknown ids = %q", got)
	}
	// Bytes that are not UTF-8 survive DecodeBytes and become U+FFFD in Decode.
	raw := "a\xff\xf0\x9f\x98b"
	ids = tok.Encode(raw, EncodeOptions{})
	if got := string(tok.DecodeBytes(ids, false)); got != raw {
		t.Errorf("DecodeBytes = %q", got)
	}
	if got := tok.Decode(ids, false); got != "a\uFFFD\uFFFDb" {
		t.Errorf("Decode = %q", got)
	}
}

// The example of the Unicode standard's "U+FFFD substitution of maximal
// subparts" (§3.9), plus truncated and out-of-range sequences, checked
// against JavaScript's TextDecoder, which follows the same rule.
func TestLossyUTF8(t *testing.T) {
	in := []byte{0x61, 0xF1, 0x80, 0x80, 0xE1, 0x80, 0xC2, 0x62, 0x80, 0x63, 0x80, 0xBF, 0x64,
		0xF0, 0x9F, 0x98, 0xED, 0xA0, 0x80, 0xF4, 0x90, 0xE0, 0x80}
	want := "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd" + strings.Repeat("\uFFFD", 8)
	if got := lossyUTF8(in); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := lossyUTF8([]byte("héllo 🤗")); got != "héllo 🤗" {
		t.Fatalf("valid text changed: %q", got)
	}
}

func TestCleanUpTokenizationSpaces(t *testing.T) {
	if got := CleanUpTokenizationSpaces("Hello , world ! It 's I 'm do n't . ' x"); got != "Hello, world! It's I'm don't.'x" {
		t.Fatalf("got %q", got)
	}
}

// FuzzHFTokenizer loads arbitrary tokenizer.json bytes and encodes
// arbitrary text with each. Loading fails with an error or succeeds; a
// loaded tokenizer gives ids that are tokens, decodes to valid UTF-8, and,
// when every byte is in its vocabulary and its added tokens spell
// themselves, decodes back to the text (after NFC if it normalizes).
func FuzzHFTokenizer(f *testing.F) {
	seeds := []synth{
		{merges: [][2]string{{"a", "b"}, {"ab", "c"}, {" ", "a"}}, added: []map[string]any{{"content": "<s>"}, {"content": "<t>", "special": false, "lstrip": true, "rstrip": true}}},
		{merges: [][2]string{{"1", "2"}}, normalizer: map[string]any{"type": "NFC"}, mergeStrings: true,
			added: []map[string]any{{"content": "é", "normalized": true, "single_word": true}}},
		{preTokenizer: map[string]any{"type": "ByteLevel", "add_prefix_space": true}, modelExtra: map[string]any{"ignore_merges": true}},
		{post: map[string]any{"type": "RobertaProcessing", "sep": []any{"<s>", 256}, "cls": []any{"<s>", 256}}, added: []map[string]any{{"content": "<s>"}}},
	}
	for i, s := range seeds {
		f.Add(s.json(f), []string{"ab abc <s> x", "1212 e\u0301 é", "it's a test", "hi"}[i])
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`), "a\xff")
	f.Fuzz(func(t *testing.T, file []byte, text string) {
		if len(text) > 1000 {
			return
		}
		tok, err := Load(file, Config{})
		if err != nil {
			return
		}
		for _, opts := range []EncodeOptions{{}, {AddSpecialTokens: true}, {SplitSpecialTokens: true}} {
			ids := tok.Encode(text, opts)
			for _, id := range ids {
				if !tok.IsToken(id) {
					t.Fatalf("id %d is no token (vocab %d)", id, tok.VocabSize())
				}
			}
			if s := tok.Decode(ids, false); !utf8.ValidString(s) {
				t.Fatalf("Decode gave invalid UTF-8 %q", s)
			}
		}
		if !roundTrips(tok) {
			return
		}
		back := tok.DecodeBytes(tok.Encode(text, EncodeOptions{}), false)
		if tok.nfc {
			if utf8.ValidString(text) && norm.NFC.String(string(back)) != norm.NFC.String(text) {
				t.Fatalf("round trip: %q became %q", text, back)
			}
		} else if !bytes.Equal(back, []byte(text)) {
			t.Fatalf("round trip: %q became %q", text, back)
		}
	})
}

// roundTrips reports whether decoding must give back the text: every byte
// has a token, every added token decodes to its own content, and no space
// is put before pieces (ByteLevel's add_prefix_space, which decoding keeps).
func roundTrips(tok *Tokenizer) bool {
	for _, st := range tok.pre {
		if st.prefixSpace {
			return false
		}
	}
	for _, id := range tok.model.byteID {
		if id < 0 {
			return false
		}
	}
	for _, a := range tok.addedTokens {
		if tok.decoded[a.ID] != a.Content {
			return false
		}
	}
	return true
}
