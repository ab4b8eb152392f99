package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/model"
)

// dataCommand is `gotrain data`: turning text into llm.c token shards.
func dataCommand() *cli.Command {
	return &cli.Command{
		Name:  "data",
		Usage: "prepare training data (text documents and instruction/chat rows into llm.c token shards) and inspect it",
		Description: "Token shards are llm.c's .bin files (a 1024-byte header with magic 20240520, then uint16\n" +
			"tokens; magic 20240801 and uint32 tokens when the tokenizer has more than 65,535 ids), the format\n" +
			"llm.c and modded-nanogpt train from; gotrain train reads them with --data.",
		Subcommands: []*cli.Command{dataPrepareCommand(), dataInspectCommand()},
	}
}

func dataPrepareCommand() *cli.Command {
	return &cli.Command{
		Name:      "prepare",
		Usage:     "tokenize documents (.txt, .jsonl, .json, .json.gz, .jsonl.gz, .parquet) and instruction/chat rows into train/val token shards",
		ArgsUsage: "[INPUT...]",
		Description: "Reads documents from files, directories (walked recursively, hidden entries skipped) and globs:\n" +
			"a .txt file (or any --ext extension) is one document, a .jsonl file is one document per line\n" +
			"(the --text-field string). Documents are taken in sorted path order, each prefixed with the\n" +
			"tokenizer's end-of-text token as in llm.c's fineweb shards, and may span shard boundaries.\n" +
			"Document 0 goes to train, document 1 to val, then one document in every 1/F goes to val.\n" +
			"With a Hugging Face tokenizer, the separator is its BOS token (Llama 3), else <|endoftext|> (Qwen),\n" +
			"else its EOS token, and special tokens written in a document stay text.\n" +
			"Records of JSON and Parquet files are {text} documents, or rows: {prompt, completion} (loss on the\n" +
			"completion), {messages} (rendered with the chat template, loss on assistant turns) or pre-tokenized\n" +
			"{input_ids, labels} (labels -100: no loss). Rows are written whole with a loss-mask companion per\n" +
			"shard (train_000000.mask, which 'train_*.bin' globs do not match) and train as one sample per row.\n" +
			"Writes OUTPUT/train_000000.bin, ..., OUTPUT/val_000000.bin and OUTPUT/tokenizer.json (a copy of\n" +
			"the Hugging Face tokenizer.json and tokenizer_config.json, when that is the tokenizer).\n\n" +
			"Example:\n" +
			"  gotrain data prepare --input corpus/ --tokenizer gpt2 --output data/ --val-fraction 0.05\n" +
			"  gotrain train --config ds.json --data 'data/train_*.bin' --val-data 'data/val_*.bin'",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{
				Name:    "input",
				Aliases: []string{"i"},
				Usage:   "a document file, directory or glob (quote globs); repeat the flag for more, or pass them as arguments",
			},
			&cli.StringSliceFlag{
				Name:  "ext",
				Usage: "extension of one-document-per-file inputs, e.g. .txt or .go; repeat for more (default: .txt; .jsonl is always one document per line; with --ext, directories and globs yield only these extensions and .jsonl, so .json/.parquet records there need --ext .json/.parquet or naming the file)",
			},
			&cli.StringFlag{
				Name:  "tokenizer",
				Value: "gpt2",
				Usage: "tokenizer: gpt2 (GPT-2 BPE, 50257 ids, EOT 50256, built in, nothing downloaded), byte (UTF-8 bytes, 257 ids, EOT 256), " +
					"a Hugging Face tokenizer.json, or a directory holding one (a model snapshot: Qwen2/Qwen3, Llama 3, GPT-2 byte-level BPE), " +
					"whose files are copied beside the shards; none for pre-tokenized {input_ids, labels} rows (the shard width then follows the largest id; without the flag, data of such rows only is prepared as with none)",
			},
			&cli.StringFlag{
				Name:     "output",
				Aliases:  []string{"o"},
				Usage:    "directory to write the shards and tokenizer.json into (created if missing)",
				Required: true,
			},
			&cli.Float64Flag{
				Name:  "val-fraction",
				Value: data.DefaultValFraction,
				Usage: "fraction F in [0, 1) of documents for the val split, spread evenly; 0 writes no val split",
			},
			&cli.Int64Flag{
				Name:  "shard-tokens",
				Value: data.DefaultShardTokens,
				Usage: "most tokens per shard file",
			},
			&cli.StringFlag{
				Name:  "text-field",
				Value: data.DefaultTextField,
				Usage: "JSON field that holds the document text in .jsonl inputs",
			},
			&cli.StringFlag{Name: "prompt-field", Value: data.DefaultPromptField, Usage: "JSON/Parquet field of a {prompt, completion} row's prompt (no loss on it)"},
			&cli.StringFlag{Name: "completion-field", Value: data.DefaultCompletionField, Usage: "field of a {prompt, completion} row's completion (the loss is on it and the EOS after it)"},
			&cli.StringFlag{Name: "messages-field", Value: data.DefaultMessagesField, Usage: "field of a conversation: a list of {role, content}; loss on the assistant turns"},
			&cli.StringFlag{Name: "chat-format", Usage: "render conversations with a built-in formatter: chatml, qwen3 or llama3 (default: the tokenizer's chat_template when it is Qwen3's or Llama 3's; any other is refused)"},
			&cli.IntFlag{Name: "max-row-tokens", Usage: "longest row in tokens (0: no limit); see --overlong"},
			&cli.StringFlag{Name: "overlong", Value: "truncate", Usage: "a row longer than --max-row-tokens: truncate (keep its first tokens) or drop"},
			&cli.Int64Flag{
				Name:  "max-docs",
				Usage: "stop after this many documents (0: all)",
			},
			&cli.BoolFlag{
				Name:  "skip-bad-lines",
				Usage: "skip (and count) .jsonl lines that are not JSON or lack the text field, instead of failing",
			},
			&cli.BoolFlag{
				Name:  "force",
				Usage: "replace shards already in the output directory",
			},
			&cli.IntFlag{
				Name:  "workers",
				Usage: "goroutines that tokenize in parallel (0: one per CPU)",
			},
			&cli.BoolFlag{
				Name:    "quiet",
				Aliases: []string{"q"},
				Usage:   "no progress bar (there is none anyway when stderr is not a terminal)",
			},
		},
		Action: dataPrepareAction,
	}
}

func dataPrepareAction(c *cli.Context) error {
	// urfave/cli stops parsing flags at the first argument, so a flag after
	// an input path would otherwise be taken for a file name.
	for _, a := range c.Args().Slice() {
		if strings.HasPrefix(a, "-") {
			return fmt.Errorf("data prepare: %q comes after an input path; put flags before the inputs, or pass inputs with --input", a)
		}
	}
	inputs := append(c.StringSlice("input"), c.Args().Slice()...)
	if len(inputs) == 0 {
		return fmt.Errorf("data prepare: no inputs: pass --input PATH (a file, directory or glob) or paths as arguments")
	}
	var tok data.Tokenizer
	if spec := c.String("tokenizer"); spec != "none" {
		var err error
		if tok, err = data.NewTokenizer(spec); err != nil {
			return fmt.Errorf("data prepare: %w", err)
		}
	}
	opts := data.PrepareOptions{
		Inputs:         inputs,
		TextExtensions: c.StringSlice("ext"),
		Tokenizer:      tok,
		OutputDir:      c.String("output"),
		ValFraction:    c.Float64("val-fraction"),
		ShardTokens:    c.Int64("shard-tokens"),
		TextField:      c.String("text-field"),
		PromptField:    c.String("prompt-field"), CompletionField: c.String("completion-field"),
		MessagesField: c.String("messages-field"), ChatFormat: c.String("chat-format"),
		MaxRowTokens: c.Int("max-row-tokens"), Overlong: c.String("overlong"),
		MaxDocs:      c.Int64("max-docs"),
		SkipBadLines: c.Bool("skip-bad-lines"),
		Force:        c.Bool("force"),
		Workers:      c.Int("workers"),
	}
	// gpt2 as the flag's default is no choice: rows that carry their ids
	// then need no tokenizer.
	opts.DefaultTokenizer = !c.IsSet("tokenizer")
	if opts.ShardTokens < 1 {
		return fmt.Errorf("data prepare: --shard-tokens must be ≥ 1, got %d", opts.ShardTokens)
	}
	if !c.Bool("quiet") && dataIsTerminal(c.App.ErrWriter) {
		opts.Progress = c.App.ErrWriter
	}
	sum, err := data.Prepare(c.Context, opts)
	if err != nil {
		return err
	}
	return dataPrintSummary(c.App.Writer, opts.OutputDir, sum)
}

// dataIsTerminal reports whether w is a character device, where a progress
// bar's carriage returns render as intended.
func dataIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func dataPrintSummary(w io.Writer, dir string, s data.PrepareSummary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "prepared %s with tokenizer %s (eot %d, vocab %d, %s shards)\n", dir, s.Tokenizer.Tokenizer, s.Tokenizer.EOT,
		s.Tokenizer.VocabSize, map[data.ShardFormat]string{data.ShardGPT2: "uint16", data.ShardLlama3: "uint32"}[s.Format])
	for _, sp := range []struct {
		name string
		s    data.SplitSummary
	}{{"train", s.Train}, {"val", s.Val}} {
		fmt.Fprintf(&b, "  %-6s %s, %s tokens, %s", sp.name+":", dataPlural(int(sp.s.Documents), "document"), dataCount(sp.s.Tokens),
			dataPlural(len(sp.s.Shards), "shard"))
		if n := len(sp.s.Shards); n > 0 {
			first := filepath.Base(sp.s.Shards[0])
			if n == 1 {
				fmt.Fprintf(&b, " (%s)", first)
			} else {
				fmt.Fprintf(&b, " (%s ... %s)", first, filepath.Base(sp.s.Shards[n-1]))
			}
		}
		b.WriteByte('\n')
	}
	secs := s.Elapsed.Seconds()
	mbps := 0.0
	if secs > 0 {
		mbps = float64(s.InputBytes) / 1e6 / secs
	}
	fmt.Fprintf(&b, "  read %.1f MB from %s in %.2fs: %s tokens/s, %.2f MB/s\n",
		float64(s.InputBytes)/1e6, dataPlural(s.InputFiles, "file"), secs, dataCount(int64(s.TokensPerSecond())), mbps)
	if r := s.Rows; r.Rows+r.Dropped > 0 {
		var kinds []string
		for k, n := range r.Kinds {
			kinds = append(kinds, fmt.Sprintf("%s %s", dataCount(n), k))
		}
		sort.Strings(kinds)
		fmt.Fprintf(&b, "  rows: %s; %s labelled tokens; %s truncated, %s dropped (--max-row-tokens)\n",
			strings.Join(kinds, ", "), dataCount(r.Labels), dataCount(r.Truncated), dataCount(r.Dropped))
		fmt.Fprintf(&b, "  row lengths in tokens (longest %s):\n", dataCount(r.Longest))
		var most int64
		for _, n := range r.Lengths {
			most = max(most, n)
		}
		for i, n := range r.Lengths {
			if n == 0 {
				continue
			}
			lo, hi := int64(1)<<max(i-1, 0)+1, int64(1)<<i
			if i == 0 {
				lo = 1
			}
			fmt.Fprintf(&b, "    %7s-%-7s %8s %s\n", dataCount(lo), dataCount(hi), dataCount(n), strings.Repeat("#", int(1+39*n/most)))
		}
	}
	if s.SkippedLines > 0 {
		fmt.Fprintf(&b, "  skipped %s\n", dataPlural(int(s.SkippedLines), "bad .jsonl line"))
	}
	if s.SkippedEmptyFiles > 0 {
		fmt.Fprintf(&b, "  skipped %s\n", dataPlural(s.SkippedEmptyFiles, "empty file"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// dataCount writes n with thousands separators.
func dataCount(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + dataCount(-n)
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// dataPlural writes "1 shard" or "3 shards".
func dataPlural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return dataCount(int64(n)) + " " + noun + "s"
}

// epochSteps is the optimizer steps of --num-train-epochs E over --data:
// ceil(E × max(1, ⌊B_epoch / gas⌋)) for B_epoch micro-batches per epoch on
// each rank, as Hugging Face's Trainer counts them (a last partial
// accumulation is not a step).
func epochSteps(c *cli.Context, rk launch.Rank, batch config.Batch, mcfg model.Config) (int, error) {
	e := c.Float64("num-train-epochs")
	if !(e > 0) || math.IsInf(e, 0) {
		return 0, fmt.Errorf("--num-train-epochs %v must be positive", e)
	}
	if c.IsSet("max-steps") {
		return 0, fmt.Errorf("--num-train-epochs and --max-steps both set; pass one")
	}
	l, err := data.NewLoader(data.LoaderOptions{Shards: c.StringSlice("data"), B: batch.MicroBatch, T: c.Int("seq-len"),
		Rank: rk.Rank, WorldSize: rk.WorldSize, Vocab: mcfg.V, Pack: c.Bool("pack")})
	if err != nil {
		return 0, fmt.Errorf("--num-train-epochs: %w", err)
	}
	defer l.Close()
	perEpoch := max(1, l.BatchesPerEpoch()/int64(batch.GradAccum))
	return int(math.Ceil(e * float64(perEpoch))), nil
}
