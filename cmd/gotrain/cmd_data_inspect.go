package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/data"
)

// The marks around trained text in `data inspect`: characters prepared
// text hardly ever holds, so the spans read unambiguously.
const (
	trainedOpen  = "⟦"
	trainedClose = "⟧"
)

func dataInspectCommand() *cli.Command {
	return &cli.Command{
		Name:      "inspect",
		Usage:     "show a prepared row decoded, with the tokens the loss trains on marked, and its token and trained-token counts",
		ArgsUsage: "DIR | SHARD... [--row N] [--split train|val] [--tokens]",
		Description: "Reads row N of a prepared split (DIR/train_*.bin, or the shards given) and prints it decoded\n" +
			"with its tokenizer (DIR's tokenizer.json, else --tokenizer), the text the loss trains on between\n" +
			trainedOpen + " and " + trainedClose + ": for chat rows the assistant turns the template marked, for prompt/completion\n" +
			"rows the completion and its EOS. A row's first token is never a target (the targets are the\n" +
			"labels shifted by one). Token shards without a loss mask are a stream of documents, each\n" +
			"starting with the document separator, and every token trains; row N is then document N.\n\n" +
			"Example:\n" +
			"  gotrain data prepare --tokenizer ~/models/Qwen3-0.6B --input chats.jsonl --output data/\n" +
			"  gotrain data inspect data/ --row 3",
		Flags: []cli.Flag{
			&cli.Int64Flag{Name: "row", Usage: "row (or document) `N` to show, from 0"},
			&cli.StringFlag{Name: "split", Value: "train", Usage: "with a directory: the split to read, train or val"},
			&cli.StringFlag{Name: "tokenizer", Usage: "decode with this tokenizer (gpt2, byte, a tokenizer.json or a snapshot DIR) when the data's directory has no tokenizer.json (default: token ids)"},
			&cli.BoolFlag{Name: "tokens", Usage: "also list every token: position, id, whether it trains, and its text"},
		},
		Action: dataInspectAction,
	}
}

func dataInspectAction(c *cli.Context) error {
	args := c.Args().Slice()
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			return fmt.Errorf("data inspect: %q comes after the data; put flags before DIR", a)
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("data inspect: give the prepared directory (or its shards): gotrain data inspect data/ --row 0")
	}
	split := c.String("split")
	if split != "train" && split != "val" {
		return fmt.Errorf("data inspect: --split %q: want train or val", split)
	}
	patterns, tokDir := args, filepath.Dir(args[0])
	if st, err := os.Stat(args[0]); err == nil && st.IsDir() {
		if len(args) > 1 {
			return fmt.Errorf("data inspect: give one directory, or shard files")
		}
		patterns, tokDir = []string{filepath.Join(args[0], split+"_*.bin")}, args[0]
	}
	shards, err := data.ResolveShards(patterns)
	if err != nil {
		return fmt.Errorf("data inspect: %w", err)
	}
	tok, err := data.TokenizerForModelDir(tokDir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && c.String("tokenizer") != "":
		if tok, err = data.NewTokenizer(c.String("tokenizer")); err != nil {
			return fmt.Errorf("data inspect: --tokenizer: %w", err)
		}
	case errors.Is(err, fs.ErrNotExist):
		tok = nil
	case err != nil:
		return fmt.Errorf("data inspect: %w", err)
	}
	sep := -1
	if tok != nil {
		sep = tok.EOT()
	}
	row, err := data.ReadRow(shards, c.Int64("row"), sep)
	if err != nil {
		return err
	}
	return printRow(c, row, tok)
}

// printRow writes the row's heading, its decoded text with the trained
// spans marked, and with --tokens the token table.
func printRow(c *cli.Context, row data.Row, tok data.Tokenizer) error {
	w := c.App.Writer
	what := fmt.Sprintf("row %d of %d", row.Index, row.Rows)
	how := fmt.Sprintf("%s trained: the loss is on the text between %s and %s", dataCount(int64(row.NumTrained())), trainedOpen, trainedClose)
	if !row.Masked {
		what = fmt.Sprintf("document %d", row.Index)
		how = "all trained: a token stream has no loss mask, every token is a target (but the first of each training sample)"
	}
	if tok == nil {
		how += " (token ids: no tokenizer.json beside the data; --tokenizer decodes)"
	}
	fmt.Fprintf(w, "%s, %s: %s tokens, %s\n", row.Shard, what, dataCount(int64(len(row.Tokens))), how)
	fmt.Fprintln(w, row.Render(tok, trainedOpen, trainedClose))
	if !c.Bool("tokens") {
		return nil
	}
	fmt.Fprintf(w, "%6s %8s %-7s %s\n", "pos", "id", "trained", "text")
	for i, id := range row.Tokens {
		text := ""
		if tok != nil {
			text = strconv.Quote(tok.Decode([]int{int(id)}))
		}
		mark := ""
		if row.Trained[i] {
			mark = "yes"
		}
		fmt.Fprintf(w, "%6d %8d %-7s %s\n", i, id, mark, text)
	}
	return nil
}
