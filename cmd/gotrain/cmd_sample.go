package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sort"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
)

func sampleCommand() *cli.Command {
	return &cli.Command{
		Name:      "sample",
		Usage:     "generate text from trained weights",
		UsageText: "gotrain sample --from out/model.safetensors --prompt \"func main() {\" [--max-new-tokens 64] [--temperature 1] [--top-k 40] [--seed 1]",
		Description: "Loads Hugging Face GPT-2 safetensors (config.json beside it) or an llm.c .bin file and\n" +
			"continues the prompt token by token on the CPU. The tokenizer is read from tokenizer.json in\n" +
			"the weights' directory when present, else --tokenizer.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "from", Usage: "weights `FILE` (model.safetensors or llm.c .bin)", Required: true},
			&cli.StringFlag{Name: "prompt", Usage: "text to continue; empty: start from end-of-text"},
			&cli.IntFlag{Name: "max-new-tokens", Value: 64, Usage: "tokens to generate"},
			&cli.Float64Flag{Name: "temperature", Value: 1.0, Usage: "softmax temperature (0: greedy)"},
			&cli.IntFlag{Name: "top-k", Value: 40, Usage: "sample among the k most likely tokens (0: all)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "sampling seed"},
			&cli.StringFlag{Name: "tokenizer", Value: "gpt2", Usage: "gpt2 or byte, when no tokenizer.json sits beside the weights"},
			&cli.IntFlag{Name: "threads", Usage: "CPU threads (0: all cores)"},
		},
		Action: runSample,
	}
}

func runSample(c *cli.Context) error {
	if c.Float64("temperature") < 0 || c.Int("top-k") < 0 || c.Int("max-new-tokens") < 0 {
		return fmt.Errorf("--temperature, --top-k and --max-new-tokens must not be negative")
	}
	cfg, params, err := model.InitFrom(c.String("from"), nil)
	if err != nil {
		return err
	}
	tok, err := sampleTokenizer(filepath.Dir(c.String("from")), c.String("tokenizer"))
	if err != nil {
		return err
	}
	if tok.VocabSize() > cfg.V {
		return fmt.Errorf("tokenizer %s has %d ids but the model in %s has vocab_size %d; pass the --tokenizer it was trained with",
			tok.Name(), tok.VocabSize(), c.String("from"), cfg.V)
	}
	be, _, err := newBackend(c.Int("threads"))
	if err != nil {
		return err
	}
	// One rank holding the parameters only: an inference engine has no
	// gradients or optimizer state.
	lay := model.NewLayout(cfg)
	eo := zero.DefaultOptions(0)
	eo.Inference = true
	eng, err := zero.New(c.Context, be, comm.NewSolo(be), zero.LayoutOf(lay), eo)
	if err != nil {
		return err
	}
	defer eng.Close()
	err = eng.InitParams(func(g int) ([]float32, error) {
		off, n := lay.GroupRange(g)
		return params[off : off+n], nil
	})
	if err != nil {
		return err
	}
	m, err := model.New(be, cfg, model.Options{Store: eng})
	if err != nil {
		return err
	}
	defer m.Free()
	ids := []int32{int32(tok.EOT())}
	for _, t := range tok.Encode(c.String("prompt")) {
		ids = append(ids, int32(t))
	}
	rng := rand.New(rand.NewPCG(c.Uint64("seed"), 0x5eed))
	out := c.App.Writer
	fmt.Fprint(out, c.String("prompt"))
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
		if next == tok.EOT() {
			break
		}
		ids = append(ids, int32(next))
		gen = append(gen, next)
	}
	_, err = fmt.Fprintln(out, tok.Decode(gen))
	return err
}

// sampleTokenizer prefers the tokenizer recorded next to the weights; only
// when there is none does it use fallback. A tokenizer.json that is there but
// broken is an error, not a silent switch to another tokenizer.
func sampleTokenizer(dir, fallback string) (data.Tokenizer, error) {
	info, err := data.ReadTokenizerInfo(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return data.NewTokenizer(fallback)
	case err != nil:
		return nil, err
	}
	return info.Open()
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
