package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/model"
)

// TestSampleFromLoRARun: a LoRA run started with a relative --init-from
// records its base as an absolute path (adapter_config.json and the tag's
// meta.json); from another working directory, `sample --from RUN_DIR`
// finds that base and the run's adapter, and decodes greedily what `sample
// --from BASE --adapter RUN_DIR` does, as do `--adapter` naming the
// checkpoint tag and `--from` naming the tag; a relative base recorded by
// some other writer fails naming the file that records it.
func TestSampleFromLoRARun(t *testing.T) {
	snap := familySnapshot(t, "llama_gqa")
	shard := familyShard(t, 97, 4000)
	initAdapter, err := filepath.Abs(filepath.Join("..", "..", "model", "testdata", "lora", "llama_gqa"))
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "ds.json")
	os.WriteFile(cfgPath, []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
		"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 5e-2, "weight_decay": 0.0}}}`), 0o644)
	work := filepath.Dir(snap)
	t.Chdir(work)
	stdout, stderr, err := run(t, "train", "--config", cfgPath, "--init-from", filepath.Base(snap), "--init-adapter", initAdapter,
		"--data", shard, "--seq-len", "8", "--max-steps", "3", "--output-dir", "out", "--device", "cpu", "--metrics-addr", "off", "--peak-flops", "1e9")
	if err != nil {
		t.Fatalf("train: %v\n%s\n%s", err, stdout, stderr)
	}
	out := filepath.Join(work, "out")
	var ac struct {
		Base string `json:"base_model_name_or_path"`
	}
	raw, _ := os.ReadFile(filepath.Join(out, model.AdapterConfigFile))
	if err := json.Unmarshal(raw, &ac); err != nil || ac.Base != snap {
		t.Errorf("adapter_config.json records base %q (%v), want the absolute %q", ac.Base, err, snap)
	}
	r, err := checkpoint.Open(filepath.Join(out, "checkpoints"), "")
	if err != nil {
		t.Fatal(err)
	}
	if base := r.Meta().LoRA.Base; base != snap {
		t.Errorf("meta.json records base %q, want the absolute %q", base, snap)
	}
	r.Close()

	t.Chdir(t.TempDir())
	greedy := func(args ...string) string {
		t.Helper()
		sout, serr, err := run(t, append([]string{"sample", "--ids", "--prompt", "5 6 7", "--temperature", "0", "--max-new-tokens", "12"}, args...)...)
		if err != nil {
			t.Fatalf("sample %v: %v\n%s", args, err, serr)
		}
		return strings.TrimSpace(sout)
	}
	tag := filepath.Join(out, "checkpoints", "global_step3")
	want := greedy("--from", snap, "--adapter", out)
	if b := greedy("--from", snap); b == want {
		t.Fatalf("the adapter changes no greedy id (%q): the test cannot tell it was applied", b)
	}
	for _, args := range [][]string{{"--from", out}, {"--from", snap, "--adapter", tag}, {"--from", tag}, {"--from", filepath.Join(out, "checkpoints")}} {
		if got := greedy(args...); got != want {
			t.Errorf("sample %v gives %q, want %q (--from BASE --adapter RUN_DIR)", args, got, want)
		}
	}

	// A relative base from another working directory: the error says
	// which file recorded it.
	old := t.TempDir()
	for _, f := range []string{model.AdapterWeightsFile, model.AdapterConfigFile} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == model.AdapterConfigFile {
			b = []byte(strings.Replace(string(b), `"`+snap+`"`, `"snapshots/base"`, 1))
		}
		os.WriteFile(filepath.Join(old, f), b, 0o644)
	}
	_, serr, err := run(t, "sample", "--ids", "--prompt", "5", "--from", old)
	if err == nil {
		t.Fatal("sample --from a run whose relative base is not here succeeded")
	}
	for _, w := range []string{"snapshots/base", filepath.Join(old, model.AdapterConfigFile), "working directory", "--adapter " + old} {
		if !strings.Contains(serr+err.Error(), w) {
			t.Errorf("the error does not say %q:\n%v", w, err)
		}
	}
	if _, _, err := run(t, "sample", "--ids", "--prompt", "5", "--from", snap, "--adapter", snap); err == nil || !strings.Contains(err.Error(), "not a PEFT adapter directory") {
		t.Errorf("--adapter naming a snapshot: %v", err)
	}
}
