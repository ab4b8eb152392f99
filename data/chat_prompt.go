package data

import "fmt"

// ChatMessage is one turn of a conversation: Role is system, user,
// assistant or tool (Qwen3 only).
type ChatMessage struct {
	Role    string
	Content string
}

// ChatPromptOptions say how RenderChatPrompt renders.
type ChatPromptOptions struct {
	// Format names a built-in formatter (chatml, qwen3, llama3); "" takes
	// the one the tokenizer's chat_template is, as Prepare does.
	Format string
	// EnableThinking is the enable_thinking variable Qwen3's template
	// reads; nil leaves it undefined, the template's default, which lets
	// the model think. False writes an empty think block after the
	// generation prompt, so the reply starts at once. Other formats
	// ignore it, as their templates do.
	EnableThinking *bool
}

// ChatPrompt is a conversation rendered for generation.
type ChatPrompt struct {
	// Text is what transformers' apply_chat_template(messages,
	// add_generation_prompt=True, tokenize=False) renders.
	Text string
	// IDs are its tokens as apply_chat_template(tokenize=True) gives them:
	// the special tokens the template writes are matched, and nothing is
	// added (the template writes BOS itself where the model has one).
	IDs []int
	// EndOfTurn is the id of the token that ends an assistant turn in
	// this format (<|im_end|>, <|eot_id|>), where a reply stops; -1 when
	// the tokenizer has no such token.
	EndOfTurn int
}

// RenderChatPrompt renders msgs with the tokenizer's chat template and
// the generation prompt (the header an assistant reply follows), with the
// formatters Prepare renders training conversations with.
func RenderChatPrompt(tok Tokenizer, msgs []ChatMessage, o ChatPromptOptions) (ChatPrompt, error) {
	if _, ok := tok.(*HFTokenizer); !ok {
		return ChatPrompt{}, fmt.Errorf("a chat prompt needs a Hugging Face tokenizer with a chat template (a snapshot's tokenizer.json and tokenizer_config.json); %s has none", tok.Name())
	}
	r, err := chatRendererFor(tok, o.Format)
	if err != nil {
		return ChatPrompt{}, err
	}
	return r.prompt(tok, msgs, o.EnableThinking)
}

// prompt renders msgs and the generation prompt, and tokenizes them.
func (r *chatRenderer) prompt(tok Tokenizer, msgs []ChatMessage, enableThinking *bool) (ChatPrompt, error) {
	in := make([]chatMessage, len(msgs))
	for i, m := range msgs {
		in[i] = chatMessage{Role: m.Role, Content: m.Content}
	}
	segs, err := r.render(in)
	if err != nil {
		return ChatPrompt{}, fmt.Errorf("chat prompt: %w", err)
	}
	text := joinSegments(segs) + r.generationPrompt(enableThinking)
	end := "<|im_end|>"
	if r.format == ChatLlama3 {
		end = "<|eot_id|>"
	}
	p := ChatPrompt{Text: text, IDs: EncodeWith(tok, text, EncodeOptions{MatchSpecialTokens: true}), EndOfTurn: -1}
	if ids := EncodeWith(tok, end, EncodeOptions{MatchSpecialTokens: true}); len(ids) == 1 {
		p.EndOfTurn = ids[0]
	}
	return p, nil
}

// generationPrompt is what the template adds with add_generation_prompt:
// the assistant's header (which the first Llama 3 base template writes
// always, so render has), and Qwen3's empty think block when
// enable_thinking is false.
func (r *chatRenderer) generationPrompt(enableThinking *bool) string {
	switch r.format {
	case ChatLlama3:
		if r.alwaysPrompt {
			return ""
		}
		return "<|start_header_id|>assistant<|end_header_id|>\n\n"
	case ChatQwen3:
		if enableThinking != nil && !*enableThinking {
			return "<|im_start|>assistant\n<think>\n\n</think>\n\n"
		}
	}
	return "<|im_start|>assistant\n"
}
