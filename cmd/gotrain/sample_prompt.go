package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/internal/regularfile"
	"github.com/gotrain/gotrain/model"
)

// maxPromptBytes bounds --prompt-file (and a prompt read from stdin).
const maxPromptBytes = 16 << 20

// sampleInput is what generation starts from.
type sampleInput struct {
	ids  []int32
	echo string // printed before the continuation: the prompt text; "" with --chat and --ids
	// endOfTurn is the chat format's end-of-turn id (-1: none), where a
	// --chat reply stops.
	endOfTurn int
}

// promptText is --prompt, or --prompt-file's content less one final
// newline, the end of line an editor adds ("-" reads stdin): a prompt
// that ends with a newline is a file that ends with an empty line.
// Neither is unescaped: a "\n" typed inside double quotes is a backslash
// and an n, as the shell passes it.
func promptText(c *cli.Context) (string, error) {
	file := c.String("prompt-file")
	if file == "" {
		return c.String("prompt"), nil
	}
	if c.IsSet("prompt") {
		return "", fmt.Errorf("--prompt and --prompt-file both give the prompt: pass one")
	}
	var b []byte
	var err error
	if file == "-" {
		if b, err = io.ReadAll(io.LimitReader(c.App.Reader, maxPromptBytes+1)); err == nil && len(b) > maxPromptBytes {
			err = fmt.Errorf("more than %d bytes", maxPromptBytes)
		}
	} else {
		b, err = regularfile.Read("prompt file", file, maxPromptBytes)
	}
	if err != nil {
		return "", fmt.Errorf("--prompt-file %s: %w", file, err)
	}
	text := string(b)
	if t, ok := strings.CutSuffix(text, "\n"); ok {
		text = strings.TrimSuffix(t, "\r")
	}
	return text, nil
}

// samplePrompt is the prompt's token ids. With --chat the prompt is a
// user message (after --system's, when given) rendered with the
// tokenizer's chat template and the generation prompt, as
// apply_chat_template(add_generation_prompt=True) renders it. Otherwise
// GPT-2 starts from its end-of-text id, as it was trained (documents
// follow it in llm.c's shards); the Llama family's tokenizer adds what its
// post-processor adds (Llama 3: BOS; Qwen3: nothing), and special tokens
// written in the prompt (such as <|im_start|>) are matched, as
// transformers does. An empty prompt starts from BOS, or the end-of-text
// id when the model has none.
func samplePrompt(c *cli.Context, cfg model.Config, tok data.Tokenizer) (sampleInput, error) {
	text, err := promptText(c)
	if err != nil {
		return sampleInput{}, err
	}
	in := sampleInput{echo: text, endOfTurn: -1}
	var enc []int
	switch {
	case tok == nil:
		in.echo = ""
		for _, f := range strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' }) {
			id, err := strconv.Atoi(f)
			if err != nil || id < 0 || id >= cfg.V {
				return sampleInput{}, fmt.Errorf("--prompt with --ids: %q is not a token id in [0, %d)", f, cfg.V)
			}
			enc = append(enc, id)
		}
	case c.Bool("chat"):
		p, err := chatPrompt(c, tok, text)
		if err != nil {
			return sampleInput{}, err
		}
		enc, in.echo, in.endOfTurn = p.IDs, "", p.EndOfTurn
	case cfg.Arch == model.ArchGPT2:
		enc = append([]int{tok.EOT()}, tok.Encode(text)...)
	default:
		enc = data.EncodeWith(tok, text, data.EncodeOptions{AddSpecialTokens: true, MatchSpecialTokens: true})
	}
	for _, t := range enc {
		in.ids = append(in.ids, int32(t))
	}
	if len(in.ids) == 0 {
		start := cfg.BOS
		if start < 0 && tok != nil {
			start = tok.EOT()
		}
		if start < 0 || start >= cfg.V {
			return sampleInput{}, fmt.Errorf("an empty prompt needs a start token, but the model has no bos_token_id; give --prompt")
		}
		in.ids = append(in.ids, int32(start))
	}
	return in, nil
}

// chatPrompt renders --system and the user's text with the tokenizer's
// chat template and the generation prompt.
func chatPrompt(c *cli.Context, tok data.Tokenizer, text string) (data.ChatPrompt, error) {
	var msgs []data.ChatMessage
	if s := c.String("system"); s != "" {
		msgs = append(msgs, data.ChatMessage{Role: "system", Content: s})
	}
	msgs = append(msgs, data.ChatMessage{Role: "user", Content: text})
	o := data.ChatPromptOptions{Format: c.String("chat-format")}
	if c.IsSet("enable-thinking") {
		v := c.Bool("enable-thinking")
		o.EnableThinking = &v
	}
	p, err := data.RenderChatPrompt(tok, msgs, o)
	if err != nil {
		return data.ChatPrompt{}, fmt.Errorf("--chat: %w", err)
	}
	return p, nil
}

// checkChatFlags refuses chat flags without --chat, and --chat with --ids.
func checkChatFlags(c *cli.Context) error {
	if c.Bool("chat") {
		if c.Bool("ids") {
			return fmt.Errorf("--chat renders text with the chat template, and --ids reads token ids: pass one")
		}
		return nil
	}
	for _, f := range []string{"system", "chat-format", "enable-thinking"} {
		if c.IsSet(f) {
			return fmt.Errorf("--%s applies to a chat prompt: add --chat, or drop --%s", f, f)
		}
	}
	return nil
}
