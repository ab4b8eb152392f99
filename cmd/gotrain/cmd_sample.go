package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
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
		Name:      "sample",
		Usage:     "generate text from trained weights or a Hugging Face snapshot",
		UsageText: "gotrain sample --from out [--prompt \"func main() {\"] [--max-new-tokens 64] [--temperature 1] [--top-k 40] [--seed 1] [--ids]",
		Description: "Loads a Hugging Face snapshot directory (config.json with model.safetensors or shards: GPT-2,\n" +
			"Llama, Mistral, Qwen2, Qwen3), a safetensors file with config.json beside it, or an llm.c .bin\n" +
			"file, and continues the prompt token by token on the CPU (no KV cache: each token reruns the\n" +
			"context). The tokenizer is the tokenizer.json in the weights' directory when present (a\n" +
			"snapshot's own, with tokenizer_config.json), else --tokenizer. With --ids the prompt and the\n" +
			"output are token ids, and no tokenizer is needed. --adapter applies a PEFT LoRA adapter trained on\n" +
			"--from's model: the adapters run beside the frozen weights, as in training, unmerged.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "weights: a snapshot `DIR`, model.safetensors or an llm.c .bin file; or a LoRA run's output directory (or checkpoint tag), which records its base and holds its adapter", Required: true},
			&cli.StringFlag{Name: "prompt", Usage: "text to continue (with --ids: token ids separated by spaces or commas); empty: start from the beginning-of-text token"},
			&cli.IntFlag{Name: "max-new-tokens", Value: 64, Usage: "tokens to generate"},
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
	var tok data.Tokenizer
	if !c.Bool("ids") {
		if tok, err = sampleTokenizer(c.String("tokenizer"), weightsDir(c.String("from")), weightsDir(from)); err != nil {
			return err
		}
		if tok.VocabSize() > cfg.V {
			return fmt.Errorf("tokenizer %s has %d ids but the model in %s has vocab_size %d; pass the --tokenizer it was trained with",
				tok.Name(), tok.VocabSize(), c.String("from"), cfg.V)
		}
	}
	prompt, err := samplePrompt(c, cfg, tok)
	if err != nil {
		return err
	}
	be, _, err := newBackend(c.Int("threads"), nil)
	if err != nil {
		return err
	}
	// One rank holding the parameters only: an inference engine has no
	// gradients or optimizer state. It reads the weights group by group.
	lay := model.NewLayout(cfg)
	eo := zero.DefaultOptions(0)
	eo.Inference = true
	eng, err := zero.New(c.Context, be, comm.NewSolo(be), zero.LayoutOf(lay), eo)
	if err != nil {
		return err
	}
	defer eng.Close()
	if err := trainer.InitParamsFrom(eng, src); err != nil {
		return err
	}
	mopts := model.Options{Store: eng}
	if adapter != nil {
		ad, err := loadSampleAdapter(eng, cfg, eo, *adapter)
		if err != nil {
			return err
		}
		defer ad.Close()
		mopts.LoRA = ad.opts
	}
	m, err := model.New(be, cfg, mopts)
	if err != nil {
		return err
	}
	defer m.Free()
	stop := map[int]bool{}
	for _, id := range cfg.EOS.List() {
		stop[id] = true
	}
	if tok != nil {
		stop[tok.EOT()] = true
	}
	ids := prompt
	rng := rand.New(rand.NewPCG(c.Uint64("seed"), 0x5eed))
	out := c.App.Writer
	if tok != nil {
		fmt.Fprint(out, c.String("prompt"))
	}
	gen := make([]int, 0, c.Int("max-new-tokens"))
	for i := 0; i < c.Int("max-new-tokens"); i++ {
		ctx := ids
		if len(ctx) > cfg.MaxT {
			ctx = ctx[len(ctx)-cfg.MaxT:]
		}
		if _, err := m.Forward(ctx, nil, 1, len(ctx)); err != nil {
			return err
		}
		logits, err := m.LastLogits(0)
		if err != nil {
			return err
		}
		next := sampleToken(logits[:cfg.V], c.Float64("temperature"), c.Int("top-k"), rng)
		if stop[next] {
			break
		}
		ids = append(ids, int32(next))
		gen = append(gen, next)
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

// sampleAdapter is a LoRA adapter's engine and the model options that
// attach it.
type sampleAdapter struct {
	eng  *zero.Engine
	opts *model.LoRAOptions
}

func (a sampleAdapter) Close() { a.eng.Close() }

// loadSampleAdapter reads the LoRA adapter a for cfg's model into an
// inference engine beside base's (its parameters only, as base's).
func loadSampleAdapter(base *zero.Engine, cfg model.Config, eo zero.Options, a checkpoint.AdapterSource) (sampleAdapter, error) {
	alay, vals, err := a.Load(cfg)
	if err != nil {
		return sampleAdapter{}, fmt.Errorf("--adapter: %w", err)
	}
	eng, err := zero.NewBeside(base, zero.LayoutOf(alay), eo)
	if err != nil {
		return sampleAdapter{}, err
	}
	err = eng.InitParams(func(g int) ([]float32, error) {
		off, n := alay.GroupRange(g)
		return vals[off : off+n], nil
	})
	if err != nil {
		eng.Close()
		return sampleAdapter{}, fmt.Errorf("--adapter %s: %w", a.Dir, err)
	}
	return sampleAdapter{eng: eng, opts: &model.LoRAOptions{Layout: alay, Store: eng}}, nil
}

// sampleWeights resolves --from and --adapter into the base weights to
// open and the LoRA adapter to apply (nil: none). --from may name a LoRA
// run (its output directory, checkpoints directory or a tag), whose files
// record the base and hold the adapter; --adapter names a PEFT adapter
// directory or such a run's checkpoint tag.
func sampleWeights(from, adapter string) (string, *checkpoint.AdapterSource, error) {
	run, isAdapter, err := checkpoint.FindAdapter(from)
	if err != nil {
		return "", nil, fmt.Errorf("--from: %w", err)
	}
	if isAdapter {
		if adapter != "" {
			return "", nil, fmt.Errorf("--from %s holds a LoRA adapter and --adapter names another; give --from BASE --adapter ADAPTER, or --from %s alone", from, from)
		}
		base, err := run.BaseDir()
		if err != nil {
			return "", nil, fmt.Errorf("--from %s is a LoRA run whose base cannot be opened: %w; name it: --from BASE --adapter %s", from, err, from)
		}
		return base, &run, nil
	}
	if adapter == "" {
		return from, nil, nil
	}
	a, ok, err := checkpoint.FindAdapter(adapter)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("--adapter: %w", err)
	case !ok:
		return "", nil, fmt.Errorf("--adapter %s: not a PEFT adapter directory (%s, %s) nor a LoRA run's checkpoint (checkpoints/%s)",
			adapter, model.AdapterConfigFile, model.AdapterWeightsFile, checkpoint.TagName(100))
	}
	return from, &a, nil
}

// weightsDir is where the tokenizer of --from's weights lives: the
// snapshot directory itself, or the weight file's directory.
func weightsDir(from string) string {
	if st, err := os.Stat(from); err == nil && st.IsDir() {
		return from
	}
	return filepath.Dir(from)
}

// samplePrompt is the prompt's token ids. GPT-2 starts from its
// end-of-text id, as it was trained (documents follow it in llm.c's
// shards); the Llama family's tokenizer adds what its post-processor adds
// (Llama 3: BOS; Qwen3: nothing), and special tokens written in the prompt
// (such as <|im_start|>) are matched, as transformers does. An empty
// prompt starts from BOS, or the end-of-text id when the model has none.
func samplePrompt(c *cli.Context, cfg model.Config, tok data.Tokenizer) ([]int32, error) {
	var ids []int32
	if tok == nil {
		for _, f := range strings.FieldsFunc(c.String("prompt"), func(r rune) bool { return r == ',' || r == ' ' }) {
			id, err := strconv.Atoi(f)
			if err != nil || id < 0 || id >= cfg.V {
				return nil, fmt.Errorf("--prompt with --ids: %q is not a token id in [0, %d)", f, cfg.V)
			}
			ids = append(ids, int32(id))
		}
	} else {
		var enc []int
		if cfg.Arch == model.ArchGPT2 {
			enc = append([]int{tok.EOT()}, tok.Encode(c.String("prompt"))...)
		} else {
			enc = data.EncodeWith(tok, c.String("prompt"), data.EncodeOptions{AddSpecialTokens: true, MatchSpecialTokens: true})
		}
		for _, t := range enc {
			ids = append(ids, int32(t))
		}
	}
	if len(ids) == 0 {
		start := cfg.BOS
		if start < 0 && tok != nil {
			start = tok.EOT()
		}
		if start < 0 || start >= cfg.V {
			return nil, fmt.Errorf("an empty prompt needs a start token, but the model has no bos_token_id; give --prompt")
		}
		ids = append(ids, int32(start))
	}
	return ids, nil
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
