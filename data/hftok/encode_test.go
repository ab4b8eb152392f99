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

// FuzzHFTokenizer loads arbitrary tokenizer.json and tokenizer_config.json
// bytes and encodes arbitrary text with each. Loading fails with an error
// or succeeds; a loaded tokenizer's special tokens are tokens, its ids are
// tokens, decodes to valid UTF-8, and,
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
	configs := []string{`{}`, `{"bos_token": "<s>", "eos_token": {"content": "<t>"}, "chat_template": "x"}`, `null`,
		`{"pad_token": "<s>", "chat_template": [{"name": "default", "template": "y"}]}`}
	for i, s := range seeds {
		f.Add(s.json(f), []byte(configs[i]), []string{"ab abc <s> x", "1212 e\u0301 é", "it's a test", "hi"}[i])
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"ByteLevel"}}`),
		[]byte(`{"unk_token": "a"}`), "a\xff")
	f.Fuzz(func(t *testing.T, file, config []byte, text string) {
		if len(text) > 1000 {
			return
		}
		cfg, err := ParseConfig(config)
		if err != nil {
			cfg = Config{}
		}
		tok, err := Load(file, cfg)
		if err != nil {
			return
		}
		for _, s := range []Special{tok.Config().BOS, tok.Config().EOS, tok.Config().PAD, tok.Config().UNK} {
			if (s.Content == "") != (s.ID < 0) || s.ID >= 0 && !tok.IsToken(s.ID) {
				t.Fatalf("special token %+v", s)
			}
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
// has a token, every added token decodes to its own content and takes no
// whitespace in with lstrip or rstrip (the fuzzer found that one), and no
// space is put before pieces (ByteLevel's add_prefix_space, which decoding
// keeps).
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
		if tok.decoded[a.ID] != a.Content || a.LStrip || a.RStrip {
			return false
		}
	}
	return true
}

// FuzzEncode builds a valid tokenizer from the fuzzer's bytes (merges,
// added tokens and their flags, normalizer, pre-tokenizer, ignore_merges)
// and encodes text with it, so the encoder itself is fuzzed rather than the
// JSON parser: ids are tokens, Decode is valid UTF-8, and text comes back
// when it must (see roundTrips). With unique merge results and no
// ignore_merges, the ids are also the textbook algorithm's.
func FuzzEncode(f *testing.F) {
	f.Add([]byte("abbcab c"), uint16(0), "abc abcc <x> 12")
	f.Add([]byte("\xe4\xb8\xad\xe6"), uint16(0x1ff), "中文 e\u0301 <x><y>")
	f.Add([]byte("  \n\n"), uint16(0x0a5), "a  \n\n b\t'S 's")
	f.Fuzz(func(t *testing.T, mergeBytes []byte, flags uint16, text string) {
		if len(text) > 500 || len(mergeBytes) > 200 {
			return
		}
		var merges [][2]string
		made := map[string]bool{}
		syms := []string{}
		for i := 0; i+1 < len(mergeBytes); i += 2 {
			a, b := string(mergeBytes[i:i+1]), string(mergeBytes[i+1:i+2])
			// Join with an earlier result now and then, as trained merges do.
			if len(syms) > 0 && mergeBytes[i]%3 == 0 {
				a = syms[int(mergeBytes[i+1])%len(syms)]
			}
			if made[a+b] || len(a+b) < 2 {
				continue
			}
			made[a+b] = true
			merges = append(merges, [2]string{a, b})
			syms = append(syms, a+b)
		}
		pre := []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": []string{PatternQwen2, PatternLlama3, PatternGPT2}[flags%3]},
				"behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": flags&0x100 != 0, "use_regex": flags&0x200 != 0},
		}
		s := synth{merges: merges, preTokenizer: map[string]any{"type": "Sequence", "pretokenizers": pre},
			modelExtra: map[string]any{"ignore_merges": flags&0x4 != 0},
			added: []map[string]any{
				{"content": "<x>", "special": true, "single_word": flags&0x8 != 0, "lstrip": flags&0x10 != 0},
				{"content": "<y>", "special": false, "rstrip": flags&0x20 != 0, "normalized": flags&0x40 != 0},
			}}
		if flags&0x80 != 0 {
			s.normalizer = map[string]any{"type": "NFC"}
		}
		tok := s.load(t)
		for _, opts := range []EncodeOptions{{}, {SplitSpecialTokens: true}} {
			ids := tok.Encode(text, opts)
			for _, id := range ids {
				if !tok.IsToken(id) {
					t.Fatalf("id %d is no token", id)
				}
			}
			if d := tok.Decode(ids, false); !utf8.ValidString(d) {
				t.Fatalf("invalid UTF-8 %q", d)
			}
			if !roundTrips(tok) {
				continue
			}
			back := string(tok.DecodeBytes(ids, false))
			if tok.nfc && utf8.ValidString(text) {
				if norm.NFC.String(back) != norm.NFC.String(text) {
					t.Fatalf("round trip: %q became %q", text, back)
				}
			} else if !tok.nfc && back != text {
				t.Fatalf("round trip: %q became %q", text, back)
			}
		}
		if flags&0x4 != 0 || flags&0x80 != 0 || flags&0x100 != 0 {
			return
		}
		rank := map[[2]string]int{}
		for i, m := range merges {
			rank[m] = i
		}
		for _, p := range tok.pieces(text) {
			if p == "<x>" || p == "<y>" {
				continue
			}
			var want []int
			for _, q := range naiveBPE(p, rank) {
				id, _ := tok.TokenID(byteLevel(q))
				want = append(want, id)
			}
			var sc scratch
			if got := tok.model.appendWord(nil, p, &sc); !slices.Equal(got, want) {
				t.Fatalf("piece %q: %v, textbook %v", p, got, want)
			}
		}
	})
}
