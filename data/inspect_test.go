package data

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadRowPromptCompletion: rows of {prompt, completion} prepared with
// the byte tokenizer into shards of at most 24 tokens read back, by their
// number across the shards, as the prompt untrained and the completion
// with its EOS trained.
func TestReadRowPromptCompletion(t *testing.T) {
	in := t.TempDir()
	var b strings.Builder
	const rows = 5
	for i := range rows {
		fmt.Fprintf(&b, "{\"prompt\": \"Q%d: what?\", \"completion\": \"A%d.\"}\n", i, i)
	}
	writeFile(t, filepath.Join(in, "rows.jsonl"), []byte(b.String()))
	out := t.TempDir()
	sum, err := Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: out, ShardTokens: 24})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Train.Shards) < 3 {
		t.Fatalf("%d shards: the test wants rows in several", len(sum.Train.Shards))
	}
	for i := range int64(rows) {
		r, err := ReadRow(sum.Train.Shards, i, NewByteTokenizer().EOT())
		if err != nil {
			t.Fatal(err)
		}
		completion := fmt.Sprintf("A%d.", i)
		want := fmt.Sprintf("Q%d: what?[%s<|endoftext|>]", i, completion)
		if got := r.Render(NewByteTokenizer(), "[", "]"); got != want || !r.Masked || r.Rows != rows || r.Index != i {
			t.Errorf("row %d: %q (masked %v, %d rows), want %q", i, got, r.Masked, r.Rows, want)
		}
		if n := r.NumTrained(); n != len(completion)+1 || len(r.Tokens) != len(fmt.Sprintf("Q%d: what?", i))+len(completion)+1 {
			t.Errorf("row %d: %d tokens, %d trained", i, len(r.Tokens), n)
		}
	}
	if _, err := ReadRow(sum.Train.Shards, rows, 256); err == nil || !strings.Contains(err.Error(), "hold 5 rows") {
		t.Errorf("row past the end: %v", err)
	}
	// Without a tokenizer: the ids, the trained ones marked.
	r, _ := ReadRow(sum.Train.Shards, 0, -1)
	if got, want := r.Render(nil, "[", "]"), "81 48 58 32 119 104 97 116 63 [65 48 46 256]"; got != want {
		t.Errorf("ids %q, want %q", got, want)
	}
}

// TestReadRowDocuments: a token stream of three documents, each after the
// separator and spanning shards of 8 tokens, reads back document by
// document, every token trained.
func TestReadRowDocuments(t *testing.T) {
	in := t.TempDir()
	docs := []string{"first document", "the second one", "third"}
	for i, d := range docs {
		writeFile(t, filepath.Join(in, fmt.Sprintf("%d.txt", i)), []byte(d))
	}
	out := t.TempDir()
	sum, err := Prepare(context.Background(), PrepareOptions{Inputs: []string{in}, Tokenizer: NewByteTokenizer(), OutputDir: out, ShardTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		r, err := ReadRow(sum.Train.Shards, int64(i), 256)
		if err != nil {
			t.Fatal(err)
		}
		want := "[<|endoftext|>" + d + "]"
		if got := r.Render(NewByteTokenizer(), "[", "]"); got != want || r.Masked || r.NumTrained() != len(d)+1 {
			t.Errorf("document %d: %q (masked %v, %d trained), want %q", i, got, r.Masked, r.NumTrained(), want)
		}
	}
	if _, err := ReadRow(sum.Train.Shards, 3, 256); err == nil || !strings.Contains(err.Error(), "hold 3 documents") {
		t.Errorf("document past the end: %v", err)
	}
	if _, err := ReadRow(sum.Train.Shards, 0, -1); err == nil || !strings.Contains(err.Error(), "separator") {
		t.Errorf("a token stream without a separator: %v", err)
	}
}
