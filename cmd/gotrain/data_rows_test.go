package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeIDRows writes n JSONL {input_ids, labels} rows of ids below top,
// with id at the end of the first row, each row's first token a prompt.
func writeIDRows(t *testing.T, path string, n, top, last int) {
	t.Helper()
	var b strings.Builder
	for j := range n {
		ids := []int{(3 * j) % top, (5*j + 1) % top, (7*j + 2) % top, (11*j + 3) % top}
		if j == 0 {
			ids[3] = last
		}
		labels := []int{-100, ids[1], ids[2], ids[3]}
		line, _ := json.Marshal(map[string]any{"input_ids": ids, "labels": labels})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The defect: `data prepare` without --tokenizer recorded gpt2 for
// pre-tokenized {input_ids, labels} rows, and training a 320-id model on
// them was refused ("the data's tokenizer gpt2 has 50257 ids") although
// every id was below 320. Rows that carry ids need no tokenizer: the
// model trains on them, from --model and from --init-from, and an id the
// model lacks is still refused before step 1, naming it.
func TestPreparedIDRowsTrainASmallVocabularyModel(t *testing.T) {
	dir := t.TempDir()
	modelCfg := filepath.Join(dir, "config.json")
	os.WriteFile(modelCfg, []byte(`{"model_type": "gpt2", "n_layer": 1, "n_head": 2, "n_embd": 16,
		"n_positions": 16, "vocab_size": 320}`), 0o644)
	cfg := filepath.Join(dir, "ds.json")
	os.WriteFile(cfg, []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}`), 0o644)
	prepare := func(name string, last int) string {
		rows := filepath.Join(dir, name+".jsonl")
		writeIDRows(t, rows, 12, 300, last)
		out := filepath.Join(dir, name)
		stdout, stderr, err := run(t, "data", "prepare", "--input", rows, "--output", out, "--val-fraction", "0", "--quiet")
		if err != nil {
			t.Fatalf("data prepare: %v\n%s", err, stderr)
		}
		if !strings.Contains(stdout, "with tokenizer none") {
			t.Errorf("data prepare of id rows says:\n%s", stdout)
		}
		if _, err := os.Stat(filepath.Join(out, "tokenizer.json")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("tokenizer.json beside id rows prepared without --tokenizer: %v", err)
		}
		return filepath.Join(out, "train_*.bin")
	}
	train := func(shards, out string, from ...string) error {
		args := append([]string{"train", "--config", cfg, "--data", shards, "--seq-len", "8", "--max-steps", "2",
			"--device", "cpu", "--threads", "1", "--peak-flops", "1e9", "--metrics-addr", "off", "--output-dir", filepath.Join(dir, out)}, from...)
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Logf("%s\n%s", stdout, stderr)
		}
		return err
	}
	ok := prepare("ok", 319)
	if err := train(ok, "run", "--model", modelCfg); err != nil {
		t.Fatalf("training a 320-id model on ids below 320: %v", err)
	}
	if err := train(ok, "run2", "--init-from", filepath.Join(dir, "run")); err != nil {
		t.Fatalf("--init-from a 320-id model on ids below 320: %v", err)
	}
	bad := prepare("bad", 400)
	if err := train(bad, "run3", "--model", modelCfg); err == nil || !strings.Contains(err.Error(), "token id 400") {
		t.Fatalf("id 400 for a 320-id model: %v, want it named", err)
	}
}
