package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/data/hftok/hftoktest"
)

// TestDataInspectChatRow: `data inspect` on conversations prepared with
// the real Qwen3 tokenizer prints a row as Qwen3's template renders it,
// with the assistant turns (each reply, its think block where the
// template writes one, and its <|im_end|>) between the marks, and the
// counts: tokens, and trained tokens as --tokens lists them.
func TestDataInspectChatRow(t *testing.T) {
	tokDir := hftoktest.Dir(t, "qwen3")
	in := filepath.Join(t.TempDir(), "chat.jsonl")
	os.WriteFile(in, []byte(`{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]}
{"messages": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}, {"role": "user", "content": "And 3+3?"}, {"role": "assistant", "content": "<think>\nEasy.\n</think>\n\n6."}]}
`), 0o644)
	out := filepath.Join(t.TempDir(), "data")
	if _, serr, err := run(t, "data", "prepare", "--tokenizer", tokDir, "--val-fraction", "0", "--output", out, "-q", in); err != nil {
		t.Fatalf("data prepare: %v\n%s", err, serr)
	}
	sout, serr, err := run(t, "data", "inspect", "--row", "1", "--tokens", out)
	if err != nil {
		t.Fatalf("data inspect: %v\n%s", err, serr)
	}
	text := "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n⟦4.<|im_end|>⟧\n" +
		"<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n⟦<think>\nEasy.\n</think>\n\n6.<|im_end|>⟧\n"
	if !strings.Contains(sout, "\n"+text+"\n") {
		t.Errorf("data inspect printed\n%s\nwithout the row\n%s", sout, text)
	}
	// The table: one line per token after its header; count them and the
	// trained ones, and check the heading's counts.
	_, table, ok := strings.Cut(sout, "trained text\n")
	if !ok {
		t.Fatalf("no token table in\n%s", sout)
	}
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	trained := 0
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 2 && f[2] == "yes" {
			trained++
		}
	}
	head := strings.SplitN(sout, "\n", 2)[0]
	want := filepath.Join(out, "train_000000.bin") + ", row 1 of 2: " + itoa(len(lines)) + " tokens, " + itoa(trained) + " trained"
	if !strings.HasPrefix(head, want) {
		t.Errorf("heading %q, want it to start %q", head, want)
	}
	// "4.<|im_end|>" and "<think>\nEasy.\n</think>\n\n6.<|im_end|>" are 3 and 9
	// Qwen3 tokens (@lenml/tokenizers, an independent port, encodes them so).
	if trained != 3+9 {
		t.Errorf("%d trained tokens, want the 3 + 9 of the two replies", trained)
	}
}
