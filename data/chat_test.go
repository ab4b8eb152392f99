package data

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

// The expected strings below are written by hand from the templates in
// the tokenizers' tokenizer_config.json, rendered as transformers'
// apply_chat_template(messages, tokenize=False) does (trim_blocks,
// lstrip_blocks; Qwen3: an empty think block on the final assistant turn,
// earlier turns' reasoning dropped; Llama 3: content trimmed, BOS first).

var threeTurns = []chatMessage{
	{Role: "system", Content: "You are helpful."},
	{Role: "user", Content: "Hi there"},
	{Role: "assistant", Content: "Hello! How can I help?"},
}

func TestChatQwen3RendersAsTransformers(t *testing.T) {
	tok, err := LoadHFTokenizer(hftoktest.Dir(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := chatRendererFor(tok, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.format != ChatQwen3 {
		t.Fatalf("Qwen3's template detected as %q", r.format)
	}
	segs, err := r.render(threeTurns)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n" +
		"<|im_start|>assistant\n<think>\n\n</think>\n\nHello! How can I help?<|im_end|>\n"
	if got := joinSegments(segs); got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	// The token ids transformers gives for this conversation.
	ids, labels, err := labelSegments(tok, segs)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := []int32{151644, 8948, 198, 2610, 525, 10950, 13, 151645, 198, 151644, 872, 198, 13048,
		1052, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271, 9707, 0, 2585, 646, 358, 1492, 30,
		151645, 198}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("ids %v\nwant %v", ids, wantIDs)
	}
	// Labels: the think block, the reply and <|im_end|> (ids 19..30).
	for i, l := range labels {
		if want := i >= 19 && i <= 30; l != want {
			t.Errorf("token %d (%d) labelled %v, want %v", i, ids[i], l, want)
		}
	}

	// Multi-turn: earlier reasoning dropped, the last turn keeps its own.
	multi := []chatMessage{
		{Role: "user", Content: "Hi there"},
		{Role: "assistant", Content: "<think>\nLet me think.\n</think>\n\nHello!"},
		{Role: "user", Content: "Again"},
		{Role: "assistant", Content: "<think>\nOK.\n</think>\n\nSure."},
	}
	segs, err = r.render(multi)
	if err != nil {
		t.Fatal(err)
	}
	want = "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n" +
		"<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n<think>\nOK.\n</think>\n\nSure.<|im_end|>\n"
	if got := joinSegments(segs); got != want {
		t.Fatalf("multi-turn rendered\n%q\nwant\n%q", got, want)
	}
}

func TestChatLlama3RendersAsTransformers(t *testing.T) {
	tok, err := LoadHFTokenizer(hftoktest.Dir(t, "llama3"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := chatRendererFor(tok, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.format != ChatLlama3 || !r.alwaysPrompt {
		t.Fatalf("Llama 3's base template detected as %q (always prompt %v)", r.format, r.alwaysPrompt)
	}
	segs, err := r.render([]chatMessage{
		{Role: "system", Content: "You are helpful."},
		{Role: "user", Content: "  Hi there\n"},
		{Role: "assistant", Content: "Hello! How can I help?"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// This first base-model upload's template has no add_generation_prompt
	// guard: the assistant header always ends the text.
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>" +
		"<|start_header_id|>assistant<|end_header_id|>\n\nHello! How can I help?<|eot_id|>" +
		"<|start_header_id|>assistant<|end_header_id|>\n\n"
	if got := joinSegments(segs); got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	ids, labels, err := labelSegments(tok, segs)
	if err != nil {
		t.Fatal(err)
	}
	var lab []int
	for i, l := range labels {
		if l {
			lab = append(lab, int(ids[i]))
		}
	}
	if got := tok.Decode(lab); got != "Hello! How can I help?<|eot_id|>" {
		t.Fatalf("labelled text %q", got)
	}
}

func TestChatUnknownTemplateRefused(t *testing.T) {
	if _, err := chatRendererFor(NewByteTokenizer(), ""); err == nil || !strings.Contains(err.Error(), "Hugging Face tokenizer") {
		t.Fatalf("byte tokenizer: %v", err)
	}
	dir := t.TempDir()
	src := hftoktest.Dir(t, "qwen3")
	b, err := os.ReadFile(filepath.Join(src, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tokenizer.json"), b)
	writeFile(t, filepath.Join(dir, "tokenizer_config.json"), []byte(`{"eos_token": "<|im_end|>", "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}`))
	tok, err := LoadHFTokenizer(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chatRendererFor(tok, ""); err == nil || !strings.Contains(err.Error(), "--chat-format") {
		t.Fatalf("unknown template: %v", err)
	}
	if r, err := chatRendererFor(tok, "chatml"); err != nil || r.format != ChatML {
		t.Fatalf("explicit chatml: %v", err)
	}
	if _, err := chatRendererFor(tok, "jinja"); err == nil || !strings.Contains(err.Error(), "unknown --chat-format") {
		t.Fatalf("unknown format: %v", err)
	}
}

// TestMessagesMaskQwen3: a messages data set prepared with the real Qwen3
// tokenizer carries labels on the assistant turns only — each reply, its
// think block where the template writes one, and its <|im_end|> — shown
// as text in the log and asserted span by span.
func TestMessagesMaskQwen3(t *testing.T) {
	tokDir := hftoktest.Dir(t, "qwen3")
	tok, err := LoadHFTokenizer(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	rows := []map[string]any{
		{"messages": []map[string]string{
			{"role": "system", "content": "You are helpful."},
			{"role": "user", "content": "Hi there"},
			{"role": "assistant", "content": "Hello! How can I help?"},
		}},
		{"messages": []map[string]string{
			{"role": "user", "content": "What is 2+2?"},
			{"role": "assistant", "content": "4."},
			{"role": "user", "content": "And 3+3? 日本語で"},
			{"role": "assistant", "content": "<think>\nEasy.\n</think>\n\n6、です。"},
		}},
	}
	var b strings.Builder
	for _, r := range rows {
		line, _ := json.Marshal(r)
		b.Write(line)
		b.WriteByte('\n')
	}
	writeFile(t, filepath.Join(in, "chat.jsonl"), []byte(b.String()))
	out := t.TempDir()
	sum, err := Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: tok, OutputDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows.Rows != 2 || sum.Rows.Kinds["{messages}"] != 2 {
		t.Fatalf("row summary %+v", sum.Rows)
	}
	_, toks, err := ReadShard(sum.Train.Shards[0])
	if err != nil {
		t.Fatal(err)
	}
	h, starts, labels, err := ReadMask(MaskPath(sum.Train.Shards[0]), int64(len(toks)))
	if err != nil {
		t.Fatal(err)
	}
	if h.NumRows != 2 || h.PadID != 151643 {
		t.Fatalf("companion header %+v, want 2 rows and pad <|endoftext|> 151643", h)
	}
	want := [][]string{
		{"<think>\n\n</think>\n\nHello! How can I help?<|im_end|>"},
		{"4.<|im_end|>", "<think>\nEasy.\n</think>\n\n6、です。<|im_end|>"},
	}
	for r := range 2 {
		spans := labelledSpans(tok, toks[starts[r]:starts[r+1]], labels[starts[r]:starts[r+1]])
		for i, s := range spans {
			t.Logf("row %d labelled span %d: %q", r, i, s)
		}
		if !slices.Equal(spans, want[r]) {
			t.Errorf("row %d labelled spans %q, want %q", r, spans, want[r])
		}
	}
}

// labelledSpans decodes each maximal run of labelled tokens.
func labelledSpans(tok Tokenizer, toks []int32, labels []bool) []string {
	var out []string
	for i := 0; i < len(toks); {
		if !labels[i] {
			i++
			continue
		}
		var ids []int
		for ; i < len(toks) && labels[i]; i++ {
			ids = append(ids, int(toks[i]))
		}
		out = append(out, tok.Decode(ids))
	}
	return out
}

func TestPyStripMatchesPython(t *testing.T) {
	for in, want := range map[string]string{" a b \n": "a b", "\u3000x\u00a0": "x", "\x1cx\x1f": "x", "x": "x", " \t ": ""} {
		if got := pyStrip(in); got != want {
			t.Errorf("pyStrip(%q) = %q, want %q", in, got, want)
		}
	}
}
