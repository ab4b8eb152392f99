package data

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idRows writes JSONL {input_ids, labels} rows whose largest id is top,
// the first two positions of each a prompt (labels -100).
func idRows(t *testing.T, path string, top int) {
	t.Helper()
	var b strings.Builder
	for j := range 20 {
		ids := []int{j, (7 * j) % top, top - 1 - j%5, top}
		labels := []int{-100, -100, ids[2], ids[3]}
		line, _ := json.Marshal(map[string]any{"input_ids": ids, "labels": labels})
		b.Write(append(line, '\n'))
	}
	writeFile(t, path, []byte(b.String()))
}

// The defect: prepared with the default tokenizer (gpt2), pre-tokenized
// rows were recorded as gpt2's data, so training a model with fewer than
// gpt2's 50257 ids was refused although every id fits it. Rows that carry
// their ids need no tokenizer: none is recorded, the shards' headers
// record the largest id, and the loader checks that against the model.
func TestPreparePreTokenizedRowsNeedNoTokenizer(t *testing.T) {
	ctx := context.Background()
	gpt2, err := NewTokenizer("gpt2")
	if err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	small := filepath.Join(in, "small.jsonl")
	idRows(t, small, 319)
	out := t.TempDir()
	// An earlier prepare's record in the output directory must go too.
	if err := WriteTokenizerInfo(out, gpt2); err != nil {
		t.Fatal(err)
	}
	sum, err := Prepare(ctx, PrepareOptions{Inputs: []string{small}, Tokenizer: gpt2, DefaultTokenizer: true, OutputDir: out, ValFraction: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, TokenizerInfoFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s beside pre-tokenized rows prepared with the default tokenizer: %v", TokenizerInfoFile, err)
	}
	if !strings.HasPrefix(sum.Tokenizer.Tokenizer, "none") || sum.Tokenizer.VocabSize != 320 || sum.Format != ShardGPT2 {
		t.Errorf("summary: tokenizer %+v, format %v; want none with 320 ids, uint16 shards", sum.Tokenizer, sum.Format)
	}
	for _, p := range append(sum.Train.Shards, sum.Val.Shards...) {
		h, err := ReadShardHeader(p)
		if err != nil {
			t.Fatal(err)
		}
		if !h.HasMaxToken || h.MaxToken > 319 || h.Format != ShardGPT2 {
			t.Errorf("%s: header records largest id %d (%v), format %v", p, h.MaxToken, h.HasMaxToken, h.Format)
		}
		m, err := OpenMask(MaskPath(p), h.NumTokens)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.PadID != 0 {
			t.Errorf("%s: pad id %d, want 0 (no tokenizer)", MaskPath(p), m.Header.PadID)
		}
		m.Close()
	}
	// The model's vocabulary is what the ids are checked against.
	train := []string{filepath.Join(out, "train_*.bin")}
	l, err := NewLoader(LoaderOptions{Shards: train, B: 1, T: 4, WorldSize: 1, Vocab: 320})
	if err != nil {
		t.Fatalf("a 320-id model: %v", err)
	}
	l.Close()
	if _, err := NewLoader(LoaderOptions{Shards: train, B: 1, T: 4, WorldSize: 1, Vocab: 319}); err == nil || !strings.Contains(err.Error(), "token id 319") {
		t.Errorf("a 319-id model: %v, want the id 319 named", err)
	}

	// Ids beyond the default's vocabulary and beyond uint16 are the data's own.
	wide := filepath.Join(t.TempDir(), "wide.jsonl")
	idRows(t, wide, 70000)
	sum, err = Prepare(ctx, PrepareOptions{Inputs: []string{wide}, Tokenizer: gpt2, DefaultTokenizer: true, OutputDir: t.TempDir()})
	if err != nil || sum.Format != ShardLlama3 || sum.Tokenizer.VocabSize != 70001 {
		t.Errorf("ids up to 70000 with the default tokenizer: %v, format %v, %+v", err, sum.Format, sum.Tokenizer)
	}

	// A tokenizer the user chose is recorded, and bounds the ids.
	out = t.TempDir()
	if _, err := Prepare(ctx, PrepareOptions{Inputs: []string{small}, Tokenizer: gpt2, OutputDir: out}); err != nil {
		t.Fatal(err)
	}
	if info, err := ReadTokenizerInfo(out); err != nil || info.Tokenizer != "gpt2" {
		t.Errorf("a chosen gpt2 is not recorded: %+v %v", info, err)
	}
	if _, err := Prepare(ctx, PrepareOptions{Inputs: []string{wide}, Tokenizer: gpt2, OutputDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "beyond the tokenizer's vocabulary") {
		t.Errorf("id 70000 with a chosen gpt2: %v", err)
	}

	// Rows that needed the default tokenizer record it, and ids beyond it
	// in the other rows are refused.
	mixed := t.TempDir()
	idRows(t, filepath.Join(mixed, "a.jsonl"), 319)
	writeFile(t, filepath.Join(mixed, "b.jsonl"), []byte(`{"prompt": "Hi", "completion": " there"}`+"\n"))
	out = t.TempDir()
	sum, err = Prepare(ctx, PrepareOptions{Inputs: []string{mixed}, Tokenizer: gpt2, DefaultTokenizer: true, OutputDir: out})
	if err != nil || sum.Tokenizer.Tokenizer != "gpt2" || sum.Format != ShardGPT2 {
		t.Fatalf("ids rows then prompt rows: %v, %+v, format %v", err, sum.Tokenizer, sum.Format)
	}
	if info, err := ReadTokenizerInfo(out); err != nil || info.Tokenizer != "gpt2" {
		t.Errorf("the default tokenizer the prompt rows needed is not recorded: %+v %v", info, err)
	}
	idRows(t, filepath.Join(mixed, "a.jsonl"), 60000)
	if _, err := Prepare(ctx, PrepareOptions{Inputs: []string{mixed}, Tokenizer: gpt2, DefaultTokenizer: true, OutputDir: t.TempDir()}); err == nil ||
		!strings.Contains(err.Error(), "id 60000") || !strings.Contains(err.Error(), "--tokenizer") {
		t.Errorf("ids beyond gpt2 among rows gpt2 tokenized: %v", err)
	}
}
