package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/data/hftok/hftoktest"
	"github.com/gotrain/gotrain/model"
)

// successorSnapshot writes a one-block Qwen3-shaped snapshot with Qwen3's
// vocabulary, and the Qwen3 tokenizer beside it, whose greedy next token
// is chosen per current token: the blocks add nothing (o_proj and
// down_proj are zero), so the final norm sees the current token's
// embedding, and next[a] = b gives a its own direction in the embedding
// and b that direction in the untied head. Any other token predicts id 0.
// config.json's eos_token_id is the base model's <|endoftext|> only.
func successorSnapshot(t *testing.T, tok data.Tokenizer, tokDir string, next map[int][]int) string {
	t.Helper()
	cfg, err := model.ParseHFConfig("successor", []byte(`{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
		"hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
		"num_key_value_heads": 1, "head_dim": 8, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
		"rope_theta": 1000000.0, "tie_word_embeddings": false, "vocab_size": 151936, "hidden_act": "silu",
		"bos_token_id": 151643, "eos_token_id": 151643}`))
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() > cfg.V {
		t.Fatalf("the tokenizer has %d ids, the fixture %d", tok.VocabSize(), cfg.V)
	}
	lay := model.NewLayout(cfg)
	params := make([]float32, lay.NumParams())
	for _, ts := range lay.Tensors() {
		if strings.Contains(ts.Name, "norm") {
			for i := range ts.Len {
				params[ts.Offset+i] = 1
			}
		}
	}
	emb, _ := lay.Lookup("model.embed_tokens.weight")
	head, _ := lay.Lookup("lm_head.weight")
	dim := 0
	for a, bs := range next {
		params[emb.Offset+a*cfg.C+dim] = 1
		for _, b := range bs {
			params[head.Offset+b*cfg.C+dim] = 1
		}
		dim++
	}
	dir := t.TempDir()
	if _, err := model.ExportSnapshot(dir, cfg, model.SliceReader(params), model.SnapshotOptions{CopyFrom: tokDir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// oneToken is text's only token id.
func oneToken(t *testing.T, tok data.Tokenizer, text string) int {
	t.Helper()
	ids := data.EncodeWith(tok, text, data.EncodeOptions{MatchSpecialTokens: true})
	if len(ids) != 1 {
		t.Fatalf("%q is %d tokens", text, len(ids))
	}
	return ids[0]
}

// TestSampleChat: `sample --chat` sends Qwen3's chat template with the
// generation prompt, and stops the reply at <|im_end|> although the
// base's config.json names only <|endoftext|>. The fixture answers
// "Sure" after the "\n\n" that ends the empty think block of
// --enable-thinking=false, and <|im_end|> after the "\n" that ends the
// default generation prompt and after "Sure". The same text given with
// --prompt-file (no --chat) is sent as it is and, without the end of turn
// as a stop, runs on past <|im_end|>.
func TestSampleChat(t *testing.T) {
	tokDir := hftoktest.Dir(t, "qwen3")
	tok, err := data.LoadHFTokenizer(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	nl, nlnl, sure, end := oneToken(t, tok, "\n"), oneToken(t, tok, "\n\n"), oneToken(t, tok, "Sure"), oneToken(t, tok, "<|im_end|>")
	snap := successorSnapshot(t, tok, tokDir, map[int][]int{nl: {end}, nlnl: {sure}, sure: {end}})
	chat := func(args ...string) string {
		t.Helper()
		args = append([]string{"sample", "--from", snap, "--temperature", "0", "--max-new-tokens", "4", "--system", "You are helpful.", "--prompt", "Hi there"}, args...)
		sout, serr, err := run(t, args...)
		if err != nil {
			t.Fatalf("sample %v: %v\n%s", args, err, serr)
		}
		return sout
	}
	if got := chat("--chat", "--enable-thinking=false"); got != "Sure\n" {
		t.Errorf("--chat --enable-thinking=false printed %q, want the reply %q", got, "Sure\n")
	}
	if got := chat("--chat"); got != "\n" {
		t.Errorf("--chat printed %q, want an empty reply (<|im_end|> first)", got)
	}
	if _, _, err := run(t, "sample", "--from", snap, "--system", "x", "--prompt", "Hi"); err == nil || !strings.Contains(err.Error(), "--chat") {
		t.Errorf("--system without --chat: %v", err)
	}

	rendered := "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
	file := filepath.Join(t.TempDir(), "prompt.txt")
	os.WriteFile(file, []byte(rendered+"\n"), 0o644) // the final newline an editor adds is dropped
	sout, serr, err := run(t, "sample", "--from", snap, "--temperature", "0", "--max-new-tokens", "2", "--prompt-file", file)
	if err != nil {
		t.Fatalf("sample --prompt-file: %v\n%s", err, serr)
	}
	if want := rendered + "<|im_end|>!\n"; sout != want {
		t.Errorf("--prompt-file printed %q, want %q", sout, want)
	}
}
