package hftok

import (
	"encoding/json"
	"strings"
	"testing"
)

// mutate loads the synthetic tokenizer after f changed its JSON document.
func mutate(t *testing.T, s synth, f func(doc map[string]any)) error {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(s.json(t), &doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(b, Config{})
	return err
}

func model(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }

func split(pattern any, behavior string) map[string]any {
	return map[string]any{"type": "Split", "pattern": pattern, "behavior": behavior, "invert": false}
}

// Every file gotrain cannot tokenize exactly is refused at load, with an
// error that names the field and the value.
func TestLoadRefusals(t *testing.T) {
	base := synth{merges: [][2]string{{"a", "b"}}, added: []map[string]any{{"content": "<s>"}}}
	for _, tc := range []struct {
		name string
		f    func(doc map[string]any)
		say  []string
	}{
		{"no model", func(d map[string]any) { delete(d, "model") }, []string{`no "model"`}},
		{"wordpiece", func(d map[string]any) { model(d)["type"] = "WordPiece" }, []string{`model: type "WordPiece" is not supported`}},
		{"byte fallback", func(d map[string]any) { model(d)["byte_fallback"] = true }, []string{"byte_fallback is true", "SentencePiece"}},
		{"dropout", func(d map[string]any) { model(d)["dropout"] = 0.1 }, []string{"dropout 0.1"}},
		{"suffix", func(d map[string]any) { model(d)["end_of_word_suffix"] = "</w>" }, []string{`end_of_word_suffix "</w>"`}},
		{"empty vocab", func(d map[string]any) { model(d)["vocab"] = map[string]any{} }, []string{"vocab is empty"}},
		{"negative id", func(d map[string]any) { model(d)["vocab"].(map[string]any)["x"] = -1 }, []string{`"x" has id -1`}},
		{"huge id", func(d map[string]any) { model(d)["vocab"].(map[string]any)["x"] = 1 << 40 }, []string{`"x" has id 1099511627776`}},
		{"sparse ids", func(d map[string]any) { model(d)["vocab"].(map[string]any)["x"] = 100000 }, []string{"largest id is 100000"}},
		{"duplicate id", func(d map[string]any) { model(d)["vocab"].(map[string]any)["x"] = 3 }, []string{"id 3 is given to both"}},
		{"unk missing", func(d map[string]any) { model(d)["unk_token"] = "<unk>" }, []string{`unk_token "<unk>" is not in the vocabulary`}},
		{"merge part missing", func(d map[string]any) { model(d)["merges"] = []any{[]any{"a", "zz"}} }, []string{`merges[0]: "zz" is not in the vocabulary`}},
		{"merge result missing", func(d map[string]any) { model(d)["merges"] = []any{[]any{"a", "c"}} }, []string{`the merge of "a" and "c", "ac", is not in the vocabulary`}},
		{"merge three parts", func(d map[string]any) { model(d)["merges"] = []any{"a b c"} }, []string{`merges[0] is "a b c"`}},
		{"merge pair of three", func(d map[string]any) { model(d)["merges"] = []any{[]any{"a", "b", "c"}} }, []string{"merges[0] has 3 parts"}},
		{"merges not a list", func(d map[string]any) { model(d)["merges"] = "a b" }, []string{"merges: want a list"}},
		{"nfkc", func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFKC"} }, []string{`normalizer: "NFKC" is not supported`}},
		{"unknown regex", func(d map[string]any) { d["pre_tokenizer"] = split(map[string]any{"Regex": `\w+`}, "Isolated") },
			[]string{`Split pattern "\\w+" is not one gotrain reads`}},
		{"string pattern", func(d map[string]any) { d["pre_tokenizer"] = split(map[string]any{"String": " "}, "Isolated") },
			[]string{`the string pattern " "`}},
		{"removed behavior", func(d map[string]any) { d["pre_tokenizer"] = split(map[string]any{"Regex": PatternGPT2}, "Removed") },
			[]string{`Split behavior "Removed"`}},
		{"whitespace", func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }, []string{`"Whitespace" is not supported`}},
		{"no byte level", func(d map[string]any) { d["pre_tokenizer"] = split(map[string]any{"Regex": PatternGPT2}, "Isolated") },
			[]string{"no ByteLevel step"}},
		{"no decoder", func(d map[string]any) { d["decoder"] = nil }, []string{"decoder: none"}},
		{"wordpiece decoder", func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece"} }, []string{`decoder: "WordPiece" is not supported`}},
		{"template unknown special", func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<bos>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
				"special_tokens": map[string]any{}}
		}, []string{`special token "<bos>" is not in special_tokens`}},
		{"template bad id", func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<bos>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
				"special_tokens": map[string]any{"<bos>": map[string]any{"id": "<bos>", "ids": []int{999999}, "tokens": []string{"<bos>"}}}}
		}, []string{"id 999999 is not a token"}},
		{"template B", func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 0}}}}
		}, []string{`sequence "B"`}},
		{"roberta bad", func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "RobertaProcessing", "sep": []any{"</s>", 999999}, "cls": []any{"<s>", 0}}
		}, []string{`RobertaProcessing: sep: id 999999`}},
		{"added id disagrees", func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["content"] = "a" }, []string{`"a" has id 257, but the vocabulary gives it 97`}},
		{"added id taken", func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = 5 }, []string{`"<s>" has id 5, which`}},
		{"added empty", func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["content"] = "" }, []string{"has empty content"}},
		{"added twice", func(d map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 300, "content": "<s>"})
		}, []string{`"<s>" is already added_tokens[0]`}},
		{"added far", func(d map[string]any) { d["added_tokens"].([]any)[0].(map[string]any)["id"] = 3_000_000 }, []string{"far beyond"}},
		{"wrong type", func(d map[string]any) { d["added_tokens"] = "x" }, []string{"not valid JSON, or a key of the wrong type"}},
		{"unigram", func(d map[string]any) {
			d["model"] = map[string]any{"type": "Unigram", "vocab": []any{[]any{"a", -1.5}}}
		},
			[]string{`model: type "Unigram" is not supported`}},
		{"huge added tokens", func(d map[string]any) {
			d["added_tokens"] = []any{map[string]any{"id": 257, "content": strings.Repeat("x", 3<<20)},
				map[string]any{"id": 258, "content": strings.Repeat("y", 3<<20)}}
		}, []string{"the contents of the first 2 tokens add up to more than"}},
	} {
		err := mutate(t, base, tc.f)
		if err == nil {
			t.Errorf("%s: loaded", tc.name)
			continue
		}
		for _, s := range tc.say {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not say %q", tc.name, err, s)
			}
		}
	}
	if _, err := Load([]byte("{"), Config{}); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("bad JSON: %v", err)
	}
	if _, err := Load(make([]byte, MaxFileBytes+1), Config{}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("huge file: %v", err)
	}
	if err := mutate(t, base, func(map[string]any) {}); err != nil {
		t.Fatalf("the unmutated file: %v", err)
	}
}

func TestConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
		"eos_token": "</s>", "pad_token": null, "add_bos_token": true, "clean_up_tokenization_spaces": true,
		"model_max_length": 1000000000000000019884624838656, "tokenizer_class": "X",
		"chat_template": [{"name": "default", "template": "{{ a }}"}, {"name": "tool_use", "template": "{{ b }}"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BOS.Content != "<s>" || cfg.EOS.Content != "</s>" || cfg.PAD.Content != "" || cfg.AddBOSToken == nil || !*cfg.AddBOSToken ||
		cfg.AddEOSToken != nil || !cfg.CleanUpTokenizationSpaces || cfg.ModelMaxLength != 0 || cfg.TokenizerClass != "X" ||
		cfg.ChatTemplate != "{{ a }}" || cfg.ChatTemplates["tool_use"] != "{{ b }}" {
		t.Fatalf("%+v", cfg)
	}
	base := synth{added: []map[string]any{{"content": "<s>"}, {"content": "</s>"}}}
	tok, err := Load(base.json(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := tok.Config(); c.BOS.ID != 256 || c.EOS.ID != 257 || c.PAD.ID != -1 {
		t.Fatalf("ids: %+v", c)
	}
	cfg.EOS.Content = "<|eot|>"
	if _, err := Load(base.json(t), cfg); err == nil || !strings.Contains(err.Error(), `eos_token "<|eot|>" is not a token`) {
		t.Fatalf("unknown eos: %v", err)
	}
	for _, bad := range []struct{ doc, say string }{
		{`{"bos_token": 5}`, "bos_token: want a string"},
		{`{"eos_token": {"lstrip": true}}`, "eos_token: want a string"},
		{`{"chat_template": 3}`, "chat_template: want a string"},
		{`{"chat_template": [{"name": "x"}]}`, "entry 0 lacks"},
		{`{"add_bos_token": "yes"}`, "not valid JSON"},
		{`[`, "not valid JSON"},
	} {
		if _, err := ParseConfig([]byte(bad.doc)); err == nil || !strings.Contains(err.Error(), bad.say) {
			t.Errorf("%s: %v", bad.doc, err)
		}
	}
	if cfg, err := ParseConfig([]byte(`{"chat_template": "T", "model_max_length": 131072}`)); err != nil || cfg.ChatTemplate != "T" || cfg.ModelMaxLength != 131072 || cfg.CleanUpTokenizationSpaces {
		t.Fatalf("%+v %v", cfg, err)
	}
}
