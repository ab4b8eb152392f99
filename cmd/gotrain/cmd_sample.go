package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
	"github.com/gotrain/gotrain/zero"
)

func sampleCommand() *cli.Command {
	return &cli.Command{
		Name:  "sample",
		Usage: "generate text from trained weights or a Hugging Face snapshot",
		UsageText: "gotrain sample --from out [--prompt \"func main() {\" | --prompt-file FILE] [--max-new-tokens 64] [--temperature 1] [--top-k 40] [--seed 1] [--ids]\n" +
			"   gotrain sample --from ./Qwen3-0.6B --chat [--system TEXT] --prompt \"Hello\" [--enable-thinking=false]",
		Description: "Loads a Hugging Face snapshot directory (config.json with model.safetensors or shards: GPT-2,\n" +
			"Llama, Mistral, Qwen2, Qwen3), a safetensors file with config.json beside it, or an llm.c .bin\n" +
			"file, and continues the prompt token by token on the CPU (no KV cache: each token reruns the\n" +
			"context). Generation stops after --max-new-tokens tokens or at an end-of-sequence token: the\n" +
			"model's eos_token_id (config.json, generation_config.json), the tokenizer's end of text and, with\n" +
			"--chat, the template's end of turn (<|im_end|>, <|eot_id|>); the stop token is not printed.\n" +
			"The tokenizer is the tokenizer.json in the weights' directory when present (a snapshot's own, with\n" +
			"tokenizer_config.json), else --tokenizer. With --ids the prompt and the output are token ids, and\n" +
			"no tokenizer is needed. The prompt is taken as the shell passes it, unescaped: \"a\\nb\" is a\n" +
			"backslash and an n; write a newline with $'a\\nb' or put the prompt in --prompt-file.\n\n" +
			"--chat makes the prompt a user message (after --system's) rendered with the snapshot's chat\n" +
			"template and the generation prompt, as transformers' apply_chat_template(add_generation_prompt=True)\n" +
			"renders it (Qwen3, Llama 3 or --chat-format's formatter, as data prepare renders conversations),\n" +
			"and prints the reply only.\n\n" +
			"--adapter applies a LoRA adapter trained on --from's model: the adapters run beside the frozen\n" +
			"weights, as in training, unmerged. --from a LoRA run's output directory does the same with the\n" +
			"base and the adapter the run recorded.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "weights: a snapshot `DIR`, model.safetensors or an llm.c .bin file; or a LoRA run's output directory (or checkpoint tag), which records its base and holds its adapter", Required: true},
			&cli.StringFlag{Name: "prompt", Usage: "text to continue, as the shell passes it (with --chat: the user's message; with --ids: token ids separated by spaces or commas); empty: start from the beginning-of-text token"},
			&cli.StringFlag{Name: "prompt-file", Usage: "read the prompt from `FILE` (- for stdin), less one final newline (end the file with an empty line for a prompt that ends with a newline)"},
			&cli.BoolFlag{Name: "chat", Usage: "render the prompt as a user message with the tokenizer's chat template and the generation prompt, and print the reply"},
			&cli.StringFlag{Name: "system", Usage: "with --chat: a system message `TEXT` before the user's"},
			&cli.StringFlag{Name: "chat-format", Usage: "with --chat: a built-in formatter (chatml, qwen3 or llama3) instead of the one the tokenizer's chat_template is"},
			&cli.BoolFlag{Name: "enable-thinking", Aliases: []string{"enable_thinking"}, Value: true, Usage: "with --chat: Qwen3's enable_thinking; =false writes an empty think block so the reply starts at once (true: the template's default, the model may think)"},
			&cli.IntFlag{Name: "max-new-tokens", Value: 64, Usage: "tokens to generate at most (generation also stops at an end-of-sequence token)"},
			&cli.Float64Flag{Name: "temperature", Value: 1.0, Usage: "softmax temperature (0: greedy)"},
			&cli.IntFlag{Name: "top-k", Value: 40, Usage: "sample among the k most likely tokens (0: all)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "sampling seed"},
			&cli.StringFlag{Name: "tokenizer", Value: "gpt2", Usage: "gpt2, byte or a tokenizer.json, when no tokenizer.json sits beside the weights"},
			&cli.BoolFlag{Name: "ids", Usage: "read --prompt as token ids and print the generated ids instead of text"},
			&cli.IntFlag{Name: "threads", Usage: "CPU threads (0: all cores)"},
			&cli.StringFlag{Name: "adapter", Usage: "apply a LoRA adapter to --from's model: a PEFT `DIR` (adapter_config.json, adapter_model.safetensors) or a LoRA run's checkpoint tag (out/checkpoints/global_stepN)"},
		},
		Action: runSample,
	}
}

func runSample(c *cli.Context) error {
	if c.Float64("temperature") < 0 || c.Int("top-k") < 0 || c.Int("max-new-tokens") < 0 {
		return fmt.Errorf("--temperature, --top-k and --max-new-tokens must not be negative")
	}
	if err := checkChatFlags(c); err != nil {
		return err
	}
	from, adapter, err := sampleWeights(c.String("from"), c.String("adapter"))
	if err != nil {
		return err
	}
	src, err := model.OpenInitFrom(from, nil)
	if err != nil {
		return err
	}
	defer src.Close()
	cfg := src.Config()
	dirs := []string{weightsDir(c.String("from")), weightsDir(from)}
	var tok data.Tokenizer
	if !c.Bool("ids") {
		if tok, err = sampleTokenizer(c.String("tokenizer"), dirs...); err != nil {
			return err
		}
		if tok.VocabSize() > cfg.V {
			return fmt.Errorf("tokenizer %s has %d ids but the model in %s has vocab_size %d; pass the --tokenizer it was trained with",
				tok.Name(), tok.VocabSize(), c.String("from"), cfg.V)
		}
	}
	in, err := samplePrompt(c, cfg, tok)
	if err != nil {
		return err
	}
	stop, err := sampleStops(cfg, tok, in.endOfTurn, dirs)
	if err != nil {
		return err
	}
	m, done, err := sampleModel(c, cfg, src, adapter)
	if err != nil {
		return err
	}
	defer done()
	out := c.App.Writer
	fmt.Fprint(out, in.echo)
	rng := rand.New(rand.NewPCG(c.Uint64("seed"), 0x5eed))
	gen, err := generate(m, cfg, in.ids, c.Int("max-new-tokens"), stop, func(logits []float32) int {
		return sampleToken(logits, c.Float64("temperature"), c.Int("top-k"), rng)
	})
	if err != nil {
		return err
	}
	if tok == nil {
		parts := make([]string, len(gen))
		for i, id := range gen {
			parts[i] = strconv.Itoa(id)
		}
		_, err = fmt.Fprintln(out, strings.Join(parts, " "))
		return err
	}
	_, err = fmt.Fprintln(out, tok.Decode(gen))
	return err
}

// sampleStops are the ids generation stops at: the model's eos_token_id
// (config.json, and generation_config.json in dirs, where transformers'
// generate reads it), the tokenizer's end of text, and a chat format's
// end of turn (-1: none).
func sampleStops(cfg model.Config, tok data.Tokenizer, endOfTurn int, dirs []string) (map[int]bool, error) {
	stop := map[int]bool{}
	for _, id := range cfg.EOS.List() {
		stop[id] = true
	}
	for _, dir := range dirs {
		ids, err := model.GenerationEOS(dir)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			stop[id] = true
		}
	}
	if tok != nil {
		stop[tok.EOT()] = true
	}
	if endOfTurn >= 0 {
		stop[endOfTurn] = true
	}
	return stop, nil
}

// sampleModel is cfg's model on one CPU rank holding the parameters only
// (an inference engine has no gradients or optimizer state), with src's
// weights read group by group and the adapter, when given, beside them.
// done frees it.
func sampleModel(c *cli.Context, cfg model.Config, src model.WeightSource, adapter *checkpoint.AdapterSource) (m *model.Model, done func(), err error) {
	be, _, err := newBackend(c.Int("threads"), nil)
	if err != nil {
		return nil, nil, err
	}
	eo := zero.DefaultOptions(0)
	eo.Inference = true
	eng, err := zero.New(c.Context, be, comm.NewSolo(be), zero.LayoutOf(model.NewLayout(cfg)), eo)
	if err != nil {
		return nil, nil, err
	}
	closers := []func(){func() { eng.Close() }}
	done = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if err := trainer.InitParamsFrom(eng, src); err != nil {
		done()
		return nil, nil, err
	}
	mopts := model.Options{Store: eng}
	if adapter != nil {
		ad, err := loadSampleAdapter(eng, cfg, eo, *adapter)
		if err != nil {
			done()
			return nil, nil, err
		}
		closers = append(closers, ad.Close)
		mopts.LoRA = ad.opts
	}
	if m, err = model.New(be, cfg, mopts); err != nil {
		done()
		return nil, nil, err
	}
	closers = append(closers, m.Free)
	return m, done, nil
}

// generate appends up to n tokens to prompt, each drawn by pick from the
// last position's logits (the model's V, padding cut), stopping before a
// token in stop. The context is the last MaxT tokens.
func generate(m *model.Model, cfg model.Config, prompt []int32, n int, stop map[int]bool, pick func([]float32) int) ([]int, error) {
	ids := slices.Clone(prompt)
	gen := make([]int, 0, n)
	for range n {
		ctx := ids
		if len(ctx) > cfg.MaxT {
			ctx = ctx[len(ctx)-cfg.MaxT:]
		}
		if _, err := m.Forward(ctx, nil, 1, len(ctx)); err != nil {
			return nil, err
		}
		logits, err := m.LastLogits(0)
		if err != nil {
			return nil, err
		}
		next := pick(logits[:cfg.V])
		if stop[next] {
			break
		}
		ids = append(ids, int32(next))
		gen = append(gen, next)
	}
	return gen, nil
}

// weightsDir is where the tokenizer of --from's weights lives: the
// snapshot directory itself, or the weight file's directory.
func weightsDir(from string) string {
	if st, err := os.Stat(from); err == nil && st.IsDir() {
		return from
	}
	return filepath.Dir(from)
}

// sampleTokenizer prefers the tokenizer recorded next to the weights (a
// snapshot's tokenizer.json, or the record train writes), in the first of
// dirs that has one; only when none has one does it use fallback. A
// tokenizer.json that is there but broken is an error, not a silent switch
// to another tokenizer.
func sampleTokenizer(fallback string, dirs ...string) (data.Tokenizer, error) {
	for _, dir := range dirs {
		tok, err := data.TokenizerForModelDir(dir)
		if !errors.Is(err, fs.ErrNotExist) {
			return tok, err
		}
	}
	return data.NewTokenizer(fallback)
}

// sampleToken draws from softmax(logits/temperature) restricted to the top k.
func sampleToken(logits []float32, temperature float64, k int, rng *rand.Rand) int {
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	if temperature == 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		return best
	}
	sort.Slice(idx, func(a, b int) bool { return logits[idx[a]] > logits[idx[b]] })
	if k > 0 && k < len(idx) {
		idx = idx[:k]
	}
	maxv := float64(logits[idx[0]])
	p := make([]float64, len(idx))
	var sum float64
	for i, j := range idx {
		p[i] = math.Exp((float64(logits[j]) - maxv) / temperature)
		sum += p[i]
	}
	u := rng.Float64() * sum
	for i, j := range idx {
		u -= p[i]
		if u <= 0 {
			return j
		}
	}
	return idx[len(idx)-1]
}
