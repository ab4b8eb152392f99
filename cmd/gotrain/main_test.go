package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
)

// run executes one gotrain command line in-process and returns its output.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = newApp(&out, &errb).RunContext(context.Background(), normalizeArgs(append([]string{"gotrain"}, args...)))
	return out.String(), errb.String(), err
}

func TestNormalizeArgsImpliesTrain(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"gotrain", "--config", "x.json"}, []string{"gotrain", "train", "--config", "x.json"}},
		{[]string{"gotrain", "--data=a.bin"}, []string{"gotrain", "train", "--data=a.bin"}},
		{[]string{"gotrain", "config", "validate", "x"}, []string{"gotrain", "config", "validate", "x"}},
		{[]string{"gotrain", "--help"}, []string{"gotrain", "--help"}},
		{[]string{"gotrain", "-v"}, []string{"gotrain", "-v"}},
		{[]string{"gotrain"}, []string{"gotrain"}},
	} {
		if got := normalizeArgs(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("normalizeArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	out, _, err := run(t, "version")
	if err != nil || !strings.HasPrefix(out, "gotrain ") {
		t.Fatalf("version: %q, %v", out, err)
	}
}

// Every command and flag has help text.
func TestHelpTextEverywhere(t *testing.T) {
	app := newApp(new(bytes.Buffer), new(bytes.Buffer))
	for _, c := range app.Commands {
		checkHelp(t, "gotrain "+c.Name, c)
	}
}

func checkHelp(t *testing.T, path string, c *cli.Command) {
	t.Helper()
	if c.Hidden {
		return
	}
	if strings.TrimSpace(c.Usage) == "" {
		t.Errorf("%s: no Usage text", path)
	}
	for _, f := range c.Flags {
		if d, ok := f.(cli.DocGenerationFlag); ok && !hiddenFlag(f) && strings.TrimSpace(d.GetUsage()) == "" {
			t.Errorf("%s --%s: no help text", path, f.Names()[0])
		}
	}
	for _, sub := range c.Subcommands {
		checkHelp(t, path+" "+sub.Name, sub)
	}
}

func hiddenFlag(f cli.Flag) bool {
	v := reflect.Indirect(reflect.ValueOf(f))
	h := v.FieldByName("Hidden")
	return h.IsValid() && h.Bool()
}

// TestSeedConfigsExplainForFourRanks: each seed config explains with --nproc 4
// and prints DeepSpeed's batch sizes. Seed 001 ships with a typo and without
// total_num_steps, so it needs --allow-unknown-keys and a run length.
func TestSeedConfigsExplainForFourRanks(t *testing.T) {
	files, err := filepath.Glob("../../config/testdata/seeds/*.json")
	if err != nil || len(files) < 9 {
		t.Fatalf("seed configs: %v, %v", files, err)
	}
	for _, f := range files {
		// Seeds 001 and 004 leave total_num_steps to the run length.
		args := []string{"config", "explain", f, "--nproc", "4", "--seq-len", "1024", "--max-steps", "100"}
		if strings.Contains(f, "001_") {
			args = append(args, "--allow-unknown-keys")
		}
		out, stderr, err := run(t, args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", f, err, stderr)
			continue
		}
		c, err := config.Load(f, config.Options{Overrides: config.Overrides{TotalSteps: config.Some(100)}})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b, err := c.Resolve(4)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// DeepSpeed's invariant, computed here from the resolved parts.
		if b.TrainBatchSize != b.MicroBatch*b.GradAccum*4 {
			t.Errorf("%s: %d != %d·%d·4", f, b.TrainBatchSize, b.MicroBatch, b.GradAccum)
		}
		for _, want := range []string{
			"train_batch_size ", itoa(b.TrainBatchSize),
			"tokens_per_step ", itoa(b.TrainBatchSize * 1024),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: explain output lacks %q", f, want)
			}
		}
	}
}

func TestConfigValidateNamesTypoAndFix(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "ds.json")
	os.WriteFile(f, []byte(`{"train_micro_batch_size_per_gpu": 2, "zero_optimisation": {"stage": 2}}`), 0o644)
	_, stderr, err := run(t, "config", "validate", f, "--nproc", "2")
	if err == nil {
		t.Fatal("validate accepted an unknown key")
	}
	if !strings.Contains(stderr, f) || !strings.Contains(stderr, "zero_optimisation") || !strings.Contains(stderr, "did you mean zero_optimization") {
		t.Errorf("error does not name file, key and suggestion:\n%s", stderr)
	}
	if _, _, err := run(t, "config", "validate", f, "--nproc", "2", "--allow-unknown-keys"); err != nil {
		t.Errorf("--allow-unknown-keys: %v", err)
	}
}

func TestDataPrepareHelloWorld(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("Hello world"), 0o644)
	outDir := filepath.Join(dir, "out")
	if _, stderr, err := run(t, "data", "prepare", "--input", dir, "--tokenizer", "gpt2", "--output", outDir, "--val-fraction", "0", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	h, toks, err := data.ReadShard(filepath.Join(outDir, "train_000000.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// GPT-2's ids for "Hello world", after the end-of-text token that starts every document.
	if want := []int32{50256, 15496, 995}; h.NumTokens != 3 || !reflect.DeepEqual(toks, want) {
		t.Errorf("tokens %v (header says %d), want %v", toks, h.NumTokens, want)
	}
}

// TestTrainAndSample trains a tiny model for a few steps through the CLI, as a
// user would, and samples from what it wrote.
func TestTrainAndSample(t *testing.T) {
	dir := t.TempDir()
	tokens := make([]int32, 4*2*8+1)
	for i := range tokens {
		tokens[i] = int32('a' + (i*7)%26)
	}
	// A byte-level GPT-2 small enough to train in a test.
	modelCfg := filepath.Join(dir, "config.json")
	os.WriteFile(modelCfg, []byte(`{"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 16,
		"n_positions": 16, "vocab_size": 257}`), 0o644)
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, tokens); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "ds.json")
	os.WriteFile(cfg, []byte(`{
		// gradient accumulation 2 over micro-batches of 2
		"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-2}},
		"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto", "warmup_num_steps": 2}},
	}`), 0o644)
	out := filepath.Join(dir, "run")
	stdout, stderr, err := run(t, "--config", cfg, "--model", modelCfg,
		"--data", shard, "--seq-len", "8", "--max-steps", "3", "--output-dir", out, "--peak-flops", "1e9", "--device", "cpu")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	f, err := os.Open(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, m)
	}
	if len(steps) != 3 {
		t.Fatalf("metrics.jsonl has %d lines, want 3", len(steps))
	}
	for _, k := range []string{"step", "loss", "lr", "grad_norm", "tokens_per_second", "loss_scale", "mfu", "memory"} {
		if _, ok := steps[2][k]; !ok {
			t.Errorf("metrics.jsonl lacks %q: %v", k, steps[2])
		}
	}
	sout, stderr, err := run(t, "sample", "--from", filepath.Join(out, "model.safetensors"), "--prompt", "abc", "--tokenizer", "byte",
		"--max-new-tokens", "5", "--temperature", "0")
	if err != nil {
		t.Fatalf("sample: %v\n%s", err, stderr)
	}
	if !strings.HasPrefix(sout, "abc") {
		t.Errorf("sample output %q does not start with the prompt", sout)
	}
}

// --device cuda on a machine without the CUDA driver fails at start-up
// with an error naming the flag and the missing library; --device auto
// trains on the CPU instead and says why.
func TestDeviceCUDAWithoutDriver(t *testing.T) {
	dir, modelCfg, shard := distFixture(t)
	t.Setenv("GOTRAIN_LIBCUDA", filepath.Join(dir, "libcuda.so.1")) // does not exist
	cfg := stageConfig(t, dir, 0, 4)
	_, _, err := run(t, "train", "--config", cfg, "--data", shard, "--model", modelCfg, "--seq-len", "16", "--max-steps", "1",
		"--device", "cuda", "--output-dir", filepath.Join(dir, "cuda"), "--metrics-addr", "off")
	if err == nil || !strings.Contains(err.Error(), "--device cuda") || !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("--device cuda without a driver: %v", err)
	}
	out, stderr, err := run(t, "train", "--config", cfg, "--data", shard, "--model", modelCfg, "--seq-len", "16", "--max-steps", "1",
		"--device", "auto", "--output-dir", filepath.Join(dir, "auto"), "--metrics-addr", "off", "--threads", "1")
	if err != nil || !strings.Contains(out, "device cpu") || !strings.Contains(stderr, "--device auto chose the CPU") {
		t.Errorf("--device auto without a driver: %v\n%s\n%s", err, out, stderr)
	}
}

// TestKeysTableInSync: the DeepSpeed keys table in docs/deepspeed-keys.md is
// what `gotrain config keys` prints.
func TestKeysTableInSync(t *testing.T) {
	const doc = "../../docs/deepspeed-keys.md"
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, "<!-- keys:begin -->\n"), strings.Index(s, "<!-- keys:end -->")
	if i < 0 || j < i {
		t.Fatalf("%s lacks the keys table markers", doc)
	}
	if got := s[i+len("<!-- keys:begin -->\n") : j]; got != config.KeysMarkdown() {
		t.Errorf("%s's keys table is stale: run scripts/update-keys-table.sh", doc)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestLoRAFlagConflicts: the LoRA shape flags are refused, naming the flag
// and the fix, where they would be ignored: without any LoRA configuration,
// or beside a --lora-config file that sets them; with --lora-r they apply.
func TestLoRAFlagConflicts(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "adapter_config.json")
	if err := os.WriteFile(file, []byte(`{"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string // "" for success
	}{
		{[]string{"--lora-alpha", "32"}, "--lora-alpha applies to LoRA"},
		{[]string{"--lora-fp32"}, "--lora-fp32 applies to LoRA"},
		{[]string{"--lora-config", file, "--lora-dropout", "0.1"}, "--lora-dropout goes with --lora-r"},
		{[]string{"--lora-config", file, "--lora-target", "q_proj"}, "edit its adapter_config.json"},
		{[]string{"--lora-r", "8", "--lora-dropout", "1.5"}, "want a probability"},
		{[]string{"--lora-config", file, "--lora-fp32"}, ""},
		{[]string{"--lora-r", "8", "--lora-alpha", "16", "--lora-dropout", "0.05", "--lora-target", "q_proj,v_proj"}, ""},
	} {
		args := append([]string{"estimate", "--model", "qwen3-0.6b", "--seq-len", "64"}, c.args...)
		_, _, err := run(t, args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}
