package data

import (
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

// The expected texts are the genuine templates rendered by Jinja2 as
// transformers' apply_chat_template(add_generation_prompt=True) renders
// them (an ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks); the Qwen3 ids are transformers' for this conversation
// (TestChatQwen3RendersAsTransformers has the same prefix), the Llama 3
// ids those of @lenml/tokenizers, an independent port of Hugging Face's
// tokenizers, encoding the text without added special tokens.

var helloPrompt = []ChatMessage{{Role: "system", Content: "You are helpful."}, {Role: "user", Content: "Hi there"}}

func TestChatPromptQwen3(t *testing.T) {
	tok, err := LoadHFTokenizer(hftoktest.Dir(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	head := "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
	headIDs := []int{151644, 8948, 198, 2610, 525, 10950, 13, 151645, 198, 151644, 872, 198, 13048, 1052, 151645, 198, 151644, 77091, 198}
	no, yes := false, true
	for _, tc := range []struct {
		name  string
		think *bool
		text  string
		ids   []int
	}{
		// enable_thinking undefined, as apply_chat_template leaves it
		// without the keyword: the model may think.
		{"default", nil, head, headIDs},
		{"enable_thinking=True", &yes, head, headIDs},
		{"enable_thinking=False", &no, head + "<think>\n\n</think>\n\n", append(slices.Clone(headIDs), 151667, 271, 151668, 271)},
	} {
		p, err := RenderChatPrompt(tok, helloPrompt, ChatPromptOptions{EnableThinking: tc.think})
		if err != nil {
			t.Fatal(err)
		}
		if p.Text != tc.text || !slices.Equal(p.IDs, tc.ids) {
			t.Errorf("%s: rendered %q\n%v\nwant %q\n%v", tc.name, p.Text, p.IDs, tc.text, tc.ids)
		}
		if p.EndOfTurn != 151645 {
			t.Errorf("%s: end of turn %d, want <|im_end|> 151645", tc.name, p.EndOfTurn)
		}
	}
	// An earlier turn's reasoning is dropped, as the template drops it.
	p, err := RenderChatPrompt(tok, []ChatMessage{{Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "<think>\nhmm\n</think>\n\nHello!"}, {Role: "user", Content: "Again"}}, ChatPromptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n"; p.Text != want {
		t.Errorf("multi-turn %q\nwant %q", p.Text, want)
	}
	// --chat-format chatml on the same tokenizer.
	p, err = RenderChatPrompt(tok, helloPrompt, ChatPromptOptions{Format: "chatml"})
	if err != nil || p.Text != head {
		t.Errorf("chatml: %q, %v", p.Text, err)
	}
}

func TestChatPromptLlama3(t *testing.T) {
	src := hftoktest.Dir(t, "llama3")
	tok, err := LoadHFTokenizer(src)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []ChatMessage{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "  Hi there\n"}}
	want := "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	wantIDs := []int{128000, 128006, 9125, 128007, 271, 3513, 10015, 13, 128009, 128006, 882, 128007, 271, 13347, 1070, 128009,
		128006, 78191, 128007, 271}
	check := func(name string, p ChatPrompt, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if p.Text != want || !slices.Equal(p.IDs, wantIDs) || p.EndOfTurn != 128009 {
			t.Errorf("%s: rendered %q\n%v (end of turn %d)\nwant %q\n%v (<|eot_id|> 128009)", name, p.Text, p.IDs, p.EndOfTurn, want, wantIDs)
		}
	}
	// The packaged base template writes the assistant header always: it
	// is written once.
	p, err := RenderChatPrompt(tok, msgs, ChatPromptOptions{})
	check("base template", p, err)
	// Meta-Llama-3-8B-Instruct's template writes it under
	// add_generation_prompt (TestChatLlama3RendersAsTransformers checks
	// which template is which).
	r := &chatRenderer{format: ChatLlama3, bos: "<|begin_of_text|>"}
	p, err = r.prompt(tok, msgs, nil)
	check("instruct template", p, err)
}

func TestChatPromptNeedsAHuggingFaceTokenizer(t *testing.T) {
	if _, err := RenderChatPrompt(NewByteTokenizer(), helloPrompt, ChatPromptOptions{}); err == nil || !strings.Contains(err.Error(), "chat template") {
		t.Errorf("byte tokenizer: %v", err)
	}
}
