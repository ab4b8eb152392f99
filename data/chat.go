package data

import (
	"fmt"
	"slices"
	"strings"
)

// Chat templates are Jinja programs in tokenizer_config.json. No maintained
// Go Jinja implementation was found to render both Qwen3's and Llama 3's
// exactly (namespace(), [::-1], loop, the trim_blocks/lstrip_blocks
// whitespace rules of transformers' environment), so gotrain renders the
// templates it knows with formatters written from them, and refuses any
// other template unless --chat-format names a formatter. Each formatter
// reproduces transformers' apply_chat_template(messages, tokenize=False)
// character for character for the conversations it accepts, and says
// which characters belong to assistant turns: the loss mask of TRL's
// assistant_only_loss, which covers what the assistant generates — its
// content and its end-of-turn token — and not the role header before it.

// ChatFormat names a built-in chat formatter.
type ChatFormat string

const (
	// ChatML is <|im_start|>{role}\n{content}<|im_end|>\n per message.
	ChatML ChatFormat = "chatml"
	// ChatQwen3 is ChatML with Qwen3's template rules: reasoning split
	// out of "<think>…</think>", an empty think block on assistant turns
	// after the last user query, earlier turns' reasoning dropped, tool
	// results merged into user turns.
	ChatQwen3 ChatFormat = "qwen3"
	// ChatLlama3 is Meta Llama 3 Instruct's template: BOS, then
	// <|start_header_id|>{role}<|end_header_id|>\n\n{content trimmed}<|eot_id|>
	// per message.
	ChatLlama3 ChatFormat = "llama3"
)

// ChatFormats lists the formatters --chat-format accepts.
func ChatFormats() []ChatFormat { return []ChatFormat{ChatML, ChatQwen3, ChatLlama3} }

// chatMessage is one turn of a messages row.
type chatMessage struct {
	Role             string
	Content          string
	ReasoningContent *string // Qwen3's reasoning_content, when present and not null
}

// chatSegment is a piece of rendered text; label marks text an assistant
// generates (a loss target).
type chatSegment struct {
	text  string
	label bool
}

// chatRenderer renders a conversation for training (no generation prompt).
type chatRenderer struct {
	format ChatFormat
	bos    string // Llama 3's bos_token
	// alwaysPrompt: the template appends the assistant header even
	// without add_generation_prompt (the first Llama 3 base upload's).
	alwaysPrompt bool
}

// chatRendererFor picks the formatter: explicit (--chat-format) wins, else
// the tokenizer's chat_template must be one gotrain recognises.
func chatRendererFor(tok Tokenizer, explicit string) (*chatRenderer, error) {
	hf, ok := tok.(*HFTokenizer)
	if !ok {
		return nil, fmt.Errorf("messages rows need a Hugging Face tokenizer with a chat template (--tokenizer DIR of a model snapshot); %s has none", tok.Name())
	}
	cfg := hf.HF().Config()
	tmpl := cfg.ChatTemplate
	r := &chatRenderer{bos: cfg.BOS.Content}
	if explicit != "" {
		f := ChatFormat(explicit)
		if !slices.Contains(ChatFormats(), f) {
			return nil, fmt.Errorf("unknown --chat-format %q (known: chatml, qwen3, llama3)", explicit)
		}
		r.format = f
	} else {
		switch {
		case tmpl == "":
			return nil, fmt.Errorf("tokenizer %s has no chat_template in its tokenizer_config.json; pass --chat-format chatml|qwen3|llama3", tok.Name())
		case strings.Contains(tmpl, "<|im_start|>") && strings.Contains(tmpl, "last_query_index") && strings.Contains(tmpl, "<think>"):
			r.format = ChatQwen3
		case strings.Contains(tmpl, "<|start_header_id|>") && strings.Contains(tmpl, "<|eot_id|>") &&
			!strings.Contains(tmpl, "Cutting Knowledge") && !strings.Contains(tmpl, "tools"):
			r.format = ChatLlama3
		default:
			return nil, fmt.Errorf("tokenizer %s's chat_template is not one gotrain renders (it renders Qwen3's and Meta Llama 3's; "+
				"no Go Jinja engine renders these templates exactly); pass --chat-format chatml|qwen3|llama3 to use a built-in formatter, "+
				"or render the rows with transformers' apply_chat_template and prepare them as {input_ids, labels}", tok.Name())
		}
	}
	if r.format == ChatLlama3 {
		if r.bos == "" {
			return nil, fmt.Errorf("--chat-format llama3 needs the tokenizer's bos_token, and %s names none", tok.Name())
		}
		r.alwaysPrompt = tmpl != "" && !strings.Contains(tmpl, "add_generation_prompt")
	}
	return r, nil
}

// render is the conversation as transformers renders it, in segments.
func (r *chatRenderer) render(msgs []chatMessage) ([]chatSegment, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("messages is empty")
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		case "tool":
			if r.format != ChatQwen3 {
				return nil, fmt.Errorf("message %d: role \"tool\" is rendered by the qwen3 format only", i)
			}
		default:
			return nil, fmt.Errorf("message %d: unknown role %q (want system, user, assistant or tool)", i, m.Role)
		}
	}
	switch r.format {
	case ChatLlama3:
		return r.renderLlama3(msgs), nil
	case ChatQwen3:
		return renderQwen3(msgs), nil
	}
	return renderChatML(msgs), nil
}

func renderChatML(msgs []chatMessage) []chatSegment {
	var out []chatSegment
	for _, m := range msgs {
		if m.Role == "assistant" {
			out = append(out, chatSegment{text: "<|im_start|>assistant\n"},
				chatSegment{text: m.Content + "<|im_end|>", label: true}, chatSegment{text: "\n"})
			continue
		}
		out = append(out, chatSegment{text: "<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n"})
	}
	return out
}

// renderQwen3 follows Qwen3's template (without tools and tool calls).
func renderQwen3(msgs []chatMessage) []chatSegment {
	var out []chatSegment
	if msgs[0].Role == "system" {
		out = append(out, chatSegment{text: "<|im_start|>system\n" + msgs[0].Content + "<|im_end|>\n"})
	}
	lastQuery := len(msgs) - 1
	for i := len(msgs) - 1; i >= 0; i-- {
		c := msgs[i].Content
		if msgs[i].Role == "user" && !(strings.HasPrefix(c, "<tool_response>") && strings.HasSuffix(c, "</tool_response>")) {
			lastQuery = i
			break
		}
	}
	for i, m := range msgs {
		switch {
		case m.Role == "user" || (m.Role == "system" && i > 0):
			out = append(out, chatSegment{text: "<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n"})
		case m.Role == "assistant":
			content, reasoning := m.Content, ""
			if m.ReasoningContent != nil {
				reasoning = *m.ReasoningContent
			} else if strings.Contains(content, "</think>") {
				parts := strings.Split(content, "</think>")
				content = strings.TrimLeft(parts[len(parts)-1], "\n")
				r := strings.Split(strings.TrimRight(parts[0], "\n"), "<think>")
				reasoning = strings.TrimLeft(r[len(r)-1], "\n")
			}
			body := content
			if i > lastQuery && (i == len(msgs)-1 || reasoning != "") {
				body = "<think>\n" + strings.Trim(reasoning, "\n") + "\n</think>\n\n" + strings.TrimLeft(content, "\n")
			}
			out = append(out, chatSegment{text: "<|im_start|>assistant\n"},
				chatSegment{text: body + "<|im_end|>", label: true}, chatSegment{text: "\n"})
		case m.Role == "tool":
			s := ""
			if i == 0 || msgs[i-1].Role != "tool" {
				s = "<|im_start|>user"
			}
			s += "\n<tool_response>\n" + m.Content + "\n</tool_response>"
			if i == len(msgs)-1 || msgs[i+1].Role != "tool" {
				s += "<|im_end|>\n"
			}
			out = append(out, chatSegment{text: s})
		}
	}
	return out
}

// renderLlama3 follows Meta Llama 3 Instruct's template: content is
// trimmed (Jinja's trim, Python's str.strip()), BOS before the first
// message.
func (r *chatRenderer) renderLlama3(msgs []chatMessage) []chatSegment {
	out := []chatSegment{{text: r.bos}}
	for _, m := range msgs {
		head := "<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n"
		body := pyStrip(m.Content) + "<|eot_id|>"
		if m.Role == "assistant" {
			out = append(out, chatSegment{text: head}, chatSegment{text: body, label: true})
			continue
		}
		out = append(out, chatSegment{text: head + body})
	}
	if r.alwaysPrompt {
		out = append(out, chatSegment{text: "<|start_header_id|>assistant<|end_header_id|>\n\n"})
	}
	return out
}

// pyStrip is Python's str.strip(): Unicode whitespace at both ends.
func pyStrip(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		switch r {
		case ' ', '\t', '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680,
			0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
			return true
		}
		return r >= 0x2000 && r <= 0x200a
	})
}

// joinSegments is the rendered text.
func joinSegments(segs []chatSegment) string {
	var b strings.Builder
	for _, s := range segs {
		b.WriteString(s.text)
	}
	return b.String()
}
