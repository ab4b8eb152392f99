package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/model"
)

// tensorDTypes is the set of stored dtypes and the element count of the
// safetensors files matching pattern.
func tensorDTypes(t *testing.T, pattern string) (map[string]bool, int) {
	t.Helper()
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Fatalf("no files match %s", pattern)
	}
	dts, n := map[string]bool{}, 0
	for _, f := range files {
		st, err := model.OpenSafetensors(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range st.Tensors() {
			dts[h.DType] = true
			n += h.NumElements()
		}
		st.Close()
	}
	return dts, n
}

// TestLoRAPEFTDefaultsAndExportDTypes: a bf16 LoRA run with --lora-r alone
// takes PEFT's LoraConfig default lora_alpha 8 (and says so), prints the
// adapters in the run header and PEFT's print_trainable_parameters line
// with the counts of the files it wrote (the adapter's elements; the
// base's plus the adapter's); `checkpoint export` keeps the adapter in the
// bf16 it trained in, and `export --merge` writes the bf16 base's
// torch_dtype unless --dtype says otherwise.
func TestLoRAPEFTDefaultsAndExportDTypes(t *testing.T) {
	snap := familySnapshot(t, "llama_linear_rope") // BF16 shards, torch_dtype bfloat16
	shard := familyShard(t, 97, 4000)
	cfgPath := filepath.Join(t.TempDir(), "ds.json")
	os.WriteFile(cfgPath, []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": true},
		"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.0}}}`), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := run(t, "train", "--config", cfgPath, "--init-from", snap, "--lora-r", "2", "--data", shard, "--seq-len", "8",
		"--max-steps", "2", "--output-dir", out, "--device", "cpu", "--metrics-addr", "off", "--peak-flops", "1e9")
	if err != nil {
		t.Fatalf("train: %v\n%s\n%s", err, stdout, stderr)
	}

	var ac struct {
		Alpha float64 `json:"lora_alpha"`
	}
	raw, _ := os.ReadFile(filepath.Join(out, model.AdapterConfigFile))
	if err := json.Unmarshal(raw, &ac); err != nil || ac.Alpha != 8 {
		t.Errorf("adapter_config.json lora_alpha %v (%v), want PEFT's default 8", ac.Alpha, err)
	}
	if !strings.Contains(stdout, "LoRA: r 2, lora_alpha 8 (scale 4)") || !strings.Contains(stdout, "PEFT's LoraConfig default") {
		t.Errorf("the run header does not describe the adapters and lora_alpha's default:\n%s", stdout)
	}

	_, trainable := tensorDTypes(t, filepath.Join(out, model.AdapterWeightsFile))
	_, base := tensorDTypes(t, filepath.Join(snap, "model*.safetensors"))
	m := regexp.MustCompile(`(?m)^trainable params: ([0-9,]+) \|\| all params: ([0-9,]+) \|\| trainable%: ([0-9]+\.[0-9]{4})$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no PEFT print_trainable_parameters line in:\n%s", stdout)
	}
	grouped := regexp.MustCompile(`^[0-9]{1,3}(,[0-9]{3})*$`)
	num := func(s string) int {
		if !grouped.MatchString(s) {
			t.Errorf("%q is not grouped by thousands as Python's ,d writes it", s)
		}
		n, _ := strconv.Atoi(strings.ReplaceAll(s, ",", ""))
		return n
	}
	if got, all := num(m[1]), num(m[2]); got != trainable || all != base+trainable {
		t.Errorf("trainable %d, all %d; want %d (the adapter file's) and %d (the base's %d + the adapter's)", got, all, trainable, base+trainable, base)
	}
	if want := fmt.Sprintf("%.4f", 100*float64(trainable)/float64(base+trainable)); m[3] != want {
		t.Errorf("trainable%% %s, want %s", m[3], want)
	}

	// The run's adapter, its export and the merged model keep bf16.
	for _, tc := range []struct {
		name  string
		args  []string
		files string
		want  string
		torch string
	}{
		{"run's adapter", nil, filepath.Join(out, model.AdapterWeightsFile), "BF16", ""},
		{"export", []string{"checkpoint", "export"}, model.AdapterWeightsFile, "BF16", ""},
		{"export --merge", []string{"checkpoint", "export", "--merge"}, "model*.safetensors", "BF16", "bfloat16"},
		{"export --merge --dtype fp32", []string{"checkpoint", "export", "--merge", "--dtype", "fp32"}, "model*.safetensors", "F32", "float32"},
	} {
		pattern := tc.files
		if tc.args != nil {
			dir := filepath.Join(t.TempDir(), "export")
			if sout, serr, err := run(t, append(tc.args, "--out", dir, out)...); err != nil {
				t.Fatalf("%s: %v\n%s\n%s", tc.name, err, sout, serr)
			}
			pattern = filepath.Join(dir, tc.files)
			if tc.torch != "" {
				var doc map[string]any
				raw, _ := os.ReadFile(filepath.Join(dir, "config.json"))
				json.Unmarshal(raw, &doc)
				if doc["torch_dtype"] != tc.torch {
					t.Errorf("%s: config.json torch_dtype %v, want %s", tc.name, doc["torch_dtype"], tc.torch)
				}
			}
		}
		if dts, _ := tensorDTypes(t, pattern); len(dts) != 1 || !dts[tc.want] {
			t.Errorf("%s stores %v, want %s", tc.name, dts, tc.want)
		}
	}
}
