package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// tokenizeMaxBytes bounds one input: tokenize reads each file whole, since
// cutting text into chunks could change its tokens at the cuts.
const tokenizeMaxBytes = 1 << 30

// tokenizeCommand is `gotrain tokenize`: text to token ids and back, to
// check a tokenizer against a reference and see what a sequence length
// keeps of a text.
func tokenizeCommand() *cli.Command {
	return &cli.Command{
		Name:      "tokenize",
		Usage:     "print the token ids of text files as JSON arrays (or, with --decode, the text of token ids)",
		ArgsUsage: "FILE... (- reads standard input)",
		Description: "Prints each FILE's token ids as one JSON array on a line of its own; with --lines, one array per\n" +
			"line of each file (lines end at \\n; a \\r before it stays in the line). Special tokens written in the\n" +
			"text (<|im_start|>, <|endoftext|>) become their ids, as transformers' tokenizer(text) does; none are\n" +
			"added unless --add-special-tokens. gotrain data prepare encodes as --split-special-tokens does, so a\n" +
			"document cannot spell a document boundary.\n" +
			"--decode reads JSON arrays of ids (what tokenize prints) and writes their text, so\n" +
			"  gotrain tokenize --tokenizer DIR f.txt | gotrain tokenize --tokenizer DIR --decode -\n" +
			"gives back f.txt (after NFC, for tokenizers that normalize).\n\n" +
			"Examples:\n" +
			"  gotrain tokenize --tokenizer ~/models/Qwen3-0.6B --lines prompts.txt\n" +
			"  gotrain tokenize --tokenizer tokenizer.json --add-special-tokens doc.txt",
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:  "tokenizer",
				Value: "gpt2",
				Usage: "gpt2, byte, a Hugging Face tokenizer.json, or a directory holding one (a model snapshot, or data gotrain prepared)",
			},
			&cli.BoolFlag{Name: "lines", Usage: "one text (and one array) per line instead of per file"},
			&cli.BoolFlag{Name: "add-special-tokens", Usage: "add what the tokenizer's post-processor adds around a text (Llama 3: BOS)"},
			&cli.BoolFlag{Name: "split-special-tokens", Usage: "encode special tokens written in the text as ordinary text, as data prepare does"},
			&cli.BoolFlag{Name: "decode", Usage: "read JSON arrays of token ids and print their text"},
			&cli.BoolFlag{Name: "skip-special-tokens", Usage: "with --decode: leave special tokens out of the text"},
		},
		Action: tokenizeAction,
	}
}

func tokenizeAction(c *cli.Context) error {
	files := c.Args().Slice()
	for _, a := range files {
		if strings.HasPrefix(a, "-") && a != "-" {
			return fmt.Errorf("tokenize: %q comes after a file name; put flags before the files", a)
		}
	}
	if len(files) == 0 {
		return fmt.Errorf("tokenize: no files: pass the text files (or - for standard input) after the flags")
	}
	decode := c.Bool("decode")
	switch {
	case decode && (c.Bool("add-special-tokens") || c.Bool("split-special-tokens")):
		return fmt.Errorf("tokenize: --add-special-tokens and --split-special-tokens are for encoding, not --decode")
	case !decode && c.Bool("skip-special-tokens"):
		return fmt.Errorf("tokenize: --skip-special-tokens is for --decode")
	}
	tok, err := data.NewTokenizer(c.String("tokenizer"))
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	out := bufio.NewWriterSize(c.App.Writer, 1<<16)
	opts := data.EncodeOptions{AddSpecialTokens: c.Bool("add-special-tokens"), MatchSpecialTokens: !c.Bool("split-special-tokens")}
	for _, f := range files {
		b, err := tokenizeRead(c, f)
		if err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
		if decode {
			err = tokenizeDecode(out, tok, f, b, c.Bool("lines"), c.Bool("skip-special-tokens"))
		} else {
			err = tokenizeEncode(out, tok, string(b), c.Bool("lines"), opts)
		}
		if err != nil {
			return fmt.Errorf("tokenize: %w", err)
		}
	}
	return out.Flush()
}

// tokenizeRead reads a whole input file, or standard input for "-".
func tokenizeRead(c *cli.Context, name string) ([]byte, error) {
	if name != "-" {
		return regularfile.Read("input", name, tokenizeMaxBytes)
	}
	b, err := io.ReadAll(io.LimitReader(c.App.Reader, tokenizeMaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("standard input: %w", err)
	}
	if len(b) > tokenizeMaxBytes {
		return nil, fmt.Errorf("standard input is more than %d bytes", tokenizeMaxBytes)
	}
	return b, nil
}

// tokenizeLines cuts text into lines at \n; a final \n ends the last line
// rather than starting an empty one.
func tokenizeLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

func tokenizeEncode(w *bufio.Writer, tok data.Tokenizer, text string, lines bool, opts data.EncodeOptions) error {
	texts := []string{text}
	if lines {
		texts = tokenizeLines(text)
	}
	buf := make([]byte, 0, 1<<12)
	for _, s := range texts {
		buf = append(buf[:0], '[')
		for i, id := range data.EncodeWith(tok, s, opts) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, int64(id), 10)
		}
		buf = append(buf, ']', '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// tokenizeDecode reads the JSON arrays of ids in b (any whitespace between
// them) and writes the text of each: as it is, or followed by a newline
// with lines.
func tokenizeDecode(w *bufio.Writer, tok data.Tokenizer, name string, b []byte, lines, skipSpecial bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	for n := 0; ; n++ {
		var ids []int64
		err := dec.Decode(&ids)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: array %d: want a JSON array of token ids (what gotrain tokenize prints): %v", name, n+1, err)
		}
		ints := make([]int, len(ids))
		for i, id := range ids {
			if id < 0 || id >= int64(tok.VocabSize()) {
				return fmt.Errorf("%s: array %d: id %d is outside the vocabulary of %s [0, %d)", name, n+1, id, tok.Name(), tok.VocabSize())
			}
			ints[i] = int(id)
		}
		if _, err := w.WriteString(data.DecodeWith(tok, ints, skipSpecial)); err != nil {
			return err
		}
		if lines {
			if err := w.WriteByte('\n'); err != nil {
				return err
			}
		}
	}
}
