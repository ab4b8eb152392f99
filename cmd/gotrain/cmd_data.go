package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/data"
)

// dataCommand is `gotrain data`: turning text into llm.c token shards.
func dataCommand() *cli.Command {
	return &cli.Command{
		Name:  "data",
		Usage: "prepare training data: text documents into llm.c token shards",
		Description: "Token shards are llm.c's .bin files (a 1024-byte header with magic 20240520, then uint16\n" +
			"tokens; magic 20240801 and uint32 tokens when the tokenizer has more than 65,535 ids), the format\n" +
			"llm.c and modded-nanogpt train from; gotrain train reads them with --data.",
		Subcommands: []*cli.Command{dataPrepareCommand()},
	}
}

func dataPrepareCommand() *cli.Command {
	return &cli.Command{
		Name:      "prepare",
		Usage:     "tokenize .txt and .jsonl documents into train/val token shards",
		ArgsUsage: "[INPUT...]",
		Description: "Reads documents from files, directories (walked recursively, hidden entries skipped) and globs:\n" +
			"a .txt file (or any --ext extension) is one document, a .jsonl file is one document per line\n" +
			"(the --text-field string). Documents are taken in sorted path order, each prefixed with the\n" +
			"tokenizer's end-of-text token as in llm.c's fineweb shards, and may span shard boundaries.\n" +
			"Document 0 goes to train, document 1 to val, then one document in every 1/F goes to val.\n" +
			"With a Hugging Face tokenizer, the separator is its BOS token (Llama 3), else <|endoftext|> (Qwen),\n" +
			"else its EOS token, and special tokens written in a document stay text.\n" +
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
				Usage: "extension of one-document-per-file inputs, e.g. .txt or .go; repeat for more (default: .txt; .jsonl is always one document per line)",
			},
			&cli.StringFlag{
				Name:  "tokenizer",
				Value: "gpt2",
				Usage: "tokenizer: gpt2 (GPT-2 BPE, 50257 ids, EOT 50256, built in, nothing downloaded), byte (UTF-8 bytes, 257 ids, EOT 256), " +
					"a Hugging Face tokenizer.json, or a directory holding one (a model snapshot: Qwen2/Qwen3, Llama 3, GPT-2 byte-level BPE), " +
					"whose files are copied beside the shards",
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
	tok, err := data.NewTokenizer(c.String("tokenizer"))
	if err != nil {
		return fmt.Errorf("data prepare: %w", err)
	}
	opts := data.PrepareOptions{
		Inputs:         inputs,
		TextExtensions: c.StringSlice("ext"),
		Tokenizer:      tok,
		OutputDir:      c.String("output"),
		ValFraction:    c.Float64("val-fraction"),
		ShardTokens:    c.Int64("shard-tokens"),
		TextField:      c.String("text-field"),
		MaxDocs:        c.Int64("max-docs"),
		SkipBadLines:   c.Bool("skip-bad-lines"),
		Force:          c.Bool("force"),
		Workers:        c.Int("workers"),
	}
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
