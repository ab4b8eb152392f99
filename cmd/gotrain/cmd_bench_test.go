package main

import (
	"strings"
	"testing"

	"github.com/gotrain/gotrain/costmodel"
)

// bench --dry-run prices the trainer's real step without a device: every
// line says it is a cost model's, the table names the ops, and the totals
// give a step time and an MFU. It refuses to price the CPU backend.
func TestBenchDryRun(t *testing.T) {
	out, _, err := run(t, "bench", "--dry-run", "--gpu", "a100", "--model", "gpt2-tiny", "--batch", "2", "--seq-len", "64")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if !strings.HasPrefix(l, costmodel.Label+" | ") {
			t.Errorf("unlabelled line: %q", l)
		}
	}
	for _, want := range []string{"NVIDIA A100", "MatmulForward", "AttentionBackward", "AdamW", "step ", "MFU at most"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, "bench", "--dry-run", "--device", "cpu", "--model", "gpt2-tiny"); err == nil ||
		!strings.Contains(err.Error(), "--device cuda") {
		t.Errorf("--dry-run --device cpu: %v", err)
	}
	if _, _, err := run(t, "bench", "--dry-run", "--gpu", "tpu", "--model", "gpt2-tiny"); err == nil ||
		!strings.Contains(err.Error(), "h100") {
		t.Errorf("--gpu tpu: %v", err)
	}
}
