package main

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
)

// familySnapshot copies a Llama-family fixture snapshot (config.json and
// its weight files) into a temporary directory with a
// generation_config.json and tokenizer_config.json beside it.
func familySnapshot(t *testing.T, fixture string) string {
	t.Helper()
	src := filepath.Join("..", "..", "model", "testdata", "llama_tiny", fixture)
	dst := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(src, "model*"))
	for _, f := range append(files, filepath.Join(src, "config.json")) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
	}
	os.WriteFile(filepath.Join(dst, "generation_config.json"), []byte(`{"eos_token_id": 2, "top_k": 20}`), 0o644)
	os.WriteFile(filepath.Join(dst, "tokenizer_config.json"), []byte(`{"eos_token": "</s>"}`), 0o644)
	return dst
}

// familyShard writes random ids below vocab as a training shard (no
// tokenizer record beside it, as llm.c's shards).
func familyShard(t *testing.T, vocab, n int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(vocab))
	}
	path := filepath.Join(t.TempDir(), "train_000000.bin")
	if err := data.WriteShard(path, data.ShardGPT2, tokens); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFineTuneSnapshotEndToEnd: `gotrain train --init-from SNAPSHOT` with
// ZeRO-3 on the BF16 two-shard Llama fixture takes the model from the
// snapshot (no --model), writes the output directory as a snapshot with
// the same tensor names and the snapshot's generation and tokenizer files;
// `checkpoint export` (bf16, a tiny --max-shard-size, fp32) writes the same
// names, torch_dtype saying the stored dtype, and the fp32 export reads
// back bit for bit equal to the final weights; `sample --ids` decodes
// greedily from the output directory.
func TestFineTuneSnapshotEndToEnd(t *testing.T) {
	snap := familySnapshot(t, "llama_linear_rope")
	shard := familyShard(t, 97, 4000)
	cfgPath := filepath.Join(t.TempDir(), "ds.json")
	os.WriteFile(cfgPath, []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
		"zero_optimization": {"stage": 3}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}}}`), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := run(t, "train", "--config", cfgPath, "--init-from", snap, "--data", shard, "--seq-len", "8",
		"--max-steps", "2", "--output-dir", out, "--device", "cpu", "--metrics-addr", "off", "--peak-flops", "1e9")
	if err != nil {
		t.Fatalf("train: %v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "llama L2 NH4 KV2") {
		t.Errorf("the start-up lines do not describe the snapshot's model:\n%s", stdout)
	}
	want, err := model.LoadHFConfig(filepath.Join(snap, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	gotCfg, final, err := model.LoadSnapshot(out)
	if err != nil {
		t.Fatal(err)
	}
	if gotCfg != want {
		t.Errorf("output config %v, want the snapshot's %v", gotCfg, want)
	}
	names := func(dir string) []string {
		w, err := model.OpenSnapshot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var out []string
		files, _ := filepath.Glob(filepath.Join(dir, "model*.safetensors"))
		for _, f := range files {
			st, err := model.OpenSafetensors(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range st.Tensors() {
				out = append(out, h.Name)
			}
			st.Close()
		}
		slices.Sort(out)
		return out
	}
	snapNames := names(snap)
	for _, f := range []string{"generation_config.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not copied into the output directory: %v", f, err)
		}
	}
	if got := names(out); !slices.Equal(got, snapNames) {
		t.Errorf("output tensor names %v, want the snapshot's %v", got, snapNames)
	}

	for _, tc := range []struct {
		dtype, size, torch string
		minFiles           int
	}{{"bf16", "8KB", "bfloat16", 3}, {"fp32", "5GB", "float32", 1}} {
		exp := filepath.Join(t.TempDir(), "export-"+tc.dtype)
		stdout, stderr, err := run(t, "checkpoint", "export", "--out", exp, "--dtype", tc.dtype, "--max-shard-size", tc.size,
			filepath.Join(out, "checkpoints"))
		if err != nil {
			t.Fatalf("checkpoint export --dtype %s: %v\n%s\n%s", tc.dtype, err, stdout, stderr)
		}
		if got := names(exp); !slices.Equal(got, snapNames) {
			t.Errorf("%s export names %v, want the snapshot's %v", tc.dtype, got, snapNames)
		}
		shards, _ := filepath.Glob(filepath.Join(exp, "model*.safetensors"))
		if len(shards) < tc.minFiles {
			t.Errorf("%s export with --max-shard-size %s wrote %d weight files", tc.dtype, tc.size, len(shards))
		}
		var doc map[string]any
		raw, _ := os.ReadFile(filepath.Join(exp, "config.json"))
		json.Unmarshal(raw, &doc)
		if doc["torch_dtype"] != tc.torch || doc["model_type"] != "llama" || !strings.Contains(string(raw), "LlamaForCausalLM") {
			t.Errorf("%s export config.json: torch_dtype %v, model_type %v", tc.dtype, doc["torch_dtype"], doc["model_type"])
		}
		if _, err := os.Stat(filepath.Join(exp, "generation_config.json")); err != nil {
			t.Errorf("%s export: generation_config.json not copied from the run's directory", tc.dtype)
		}
		if tc.dtype == "fp32" {
			if _, p, err := model.LoadSnapshot(exp); err != nil || !slices.Equal(p, final) {
				t.Errorf("the fp32 export does not read back to the final weights bit for bit (%v)", err)
			}
		}
	}

	sout, stderr, err := run(t, "sample", "--from", out, "--ids", "--prompt", "5 6 7", "--temperature", "0", "--max-new-tokens", "4")
	if err != nil {
		t.Fatalf("sample: %v\n%s", err, stderr)
	}
	if f := strings.Fields(sout); len(f) == 0 || len(f) > 4 {
		t.Errorf("sample --ids printed %q, want up to 4 ids", sout)
	}
}

// TestFamilyRefusals: a Mistral sliding_window shorter than --seq-len is
// refused before anything runs, naming the window and the longest
// sequence allowed; --init-from a snapshot of another model than --model
// names the fields that differ.
func TestFamilyRefusals(t *testing.T) {
	snap := familySnapshot(t, "mistral")
	raw, _ := os.ReadFile(filepath.Join(snap, "config.json"))
	os.WriteFile(filepath.Join(snap, "config.json"), []byte(strings.Replace(string(raw), `"sliding_window": null`, `"sliding_window": 4`, 1)), 0o644)
	shard := familyShard(t, 97, 2000)
	_, _, err := run(t, "train", "--init-from", snap, "--data", shard, "--seq-len", "8", "--max-steps", "1",
		"--output-dir", t.TempDir(), "--device", "cpu", "--metrics-addr", "off", "--micro-batch-size", "1")
	if err == nil || !strings.Contains(err.Error(), "sliding_window 4") || !strings.Contains(err.Error(), "at most 4") {
		t.Errorf("--seq-len 8 over sliding_window 4: %v", err)
	}

	other := familySnapshot(t, "llama_gqa")
	_, _, err = run(t, "train", "--model", "qwen3-0.6b", "--init-from", other, "--data", shard, "--seq-len", "8", "--max-steps", "1",
		"--output-dir", t.TempDir(), "--device", "cpu", "--metrics-addr", "off")
	if err == nil || !strings.Contains(err.Error(), "Arch: llama → qwen3") || !strings.Contains(err.Error(), "drop --model") {
		t.Errorf("--init-from a llama snapshot with --model qwen3-0.6b: %v", err)
	}
}

// TestEstimateLongSequenceActivations: `gotrain estimate --model qwen3-0.6b
// --nproc 8` with bf16 and ZeRO-3 reports activations at --seq-len 8192 at
// most 2.2× those at 4096: attention keeps O(T) per head (output and
// log-sum-exp), never a T×T buffer, so activations grow linearly with T.
// The table names the model by its family and shape.
func TestEstimateLongSequenceActivations(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "ds.json")
	os.WriteFile(cfg, []byte(`{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": true},
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}, "zero_optimization": {"stage": 3}}`), 0o644)
	act := map[int]float64{}
	for _, T := range []int{4096, 8192} {
		out, stderr, err := run(t, "estimate", "--model", "qwen3-0.6b", "--config", cfg, "--nproc", "8", "--seq-len", strconv.Itoa(T), "--json")
		if err != nil {
			t.Fatalf("estimate T=%d: %v\n%s", T, err, stderr)
		}
		var est struct {
			Activations struct {
				Device float64 `json:"device"`
			} `json:"activations_full"`
		}
		if err := json.Unmarshal([]byte(out), &est); err != nil {
			t.Fatalf("estimate --json: %v\n%s", err, out)
		}
		act[T] = est.Activations.Device
	}
	if act[4096] <= 0 || act[8192]/act[4096] > 2.2 {
		t.Errorf("activations %.0f B at T=4096, %.0f B at T=8192: ratio %.2f, want at most 2.2", act[4096], act[8192], act[8192]/act[4096])
	}
	t.Logf("qwen3-0.6b bf16 ZeRO-3 activations: %.2f GiB at 4096, %.2f GiB at 8192 (×%.2f)", act[4096]/(1<<30), act[8192]/(1<<30), act[8192]/act[4096])
	out, _, err := run(t, "estimate", "--model", "qwen3-0.6b", "--config", cfg, "--nproc", "8", "--seq-len", "4096")
	if err != nil || !strings.HasPrefix(out, "qwen3 L28 NH16 KV8 HD128 C1024 FF3072, vocab 151936 |") {
		t.Errorf("estimate table header: %v\n%s", err, out)
	}
}
