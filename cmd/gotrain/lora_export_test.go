package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/model"
)

// TestLoRAExportAndSampleEndToEnd: `gotrain train` with LoRA on the
// llama_gqa snapshot (started from the committed PEFT adapter, A and B
// nonzero) writes a LoRA checkpoint; `checkpoint export` without --merge
// writes the adapter the run wrote; `export --merge --base SNAPSHOT`
// writes the snapshot's tensor names and config.json with every weight
// within 1e-6 of W + s·B·A computed here in float64 from the saved
// adapter's and the snapshot's files (PEFT's merge); and `sample
// --adapter` decodes greedily the ids the merged export does, which
// differ from the base's.
func TestLoRAExportAndSampleEndToEnd(t *testing.T) {
	snap := familySnapshot(t, "llama_gqa")
	shard := familyShard(t, 97, 4000)
	init := filepath.Join("..", "..", "model", "testdata", "lora", "llama_gqa")
	cfgPath := filepath.Join(t.TempDir(), "ds.json")
	os.WriteFile(cfgPath, []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
		"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 5e-2, "weight_decay": 0.0}}}`), 0o644)
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := run(t, "train", "--config", cfgPath, "--init-from", snap, "--init-adapter", init, "--data", shard, "--seq-len", "8",
		"--max-steps", "3", "--output-dir", out, "--device", "cpu", "--metrics-addr", "off", "--peak-flops", "1e9")
	if err != nil {
		t.Fatalf("train: %v\n%s\n%s", err, stdout, stderr)
	}

	// Without --merge: the adapter, equal to the one the run wrote.
	adir := filepath.Join(t.TempDir(), "adapter")
	if stdout, stderr, err := run(t, "checkpoint", "export", "--out", adir, out); err != nil {
		t.Fatalf("checkpoint export: %v\n%s\n%s", err, stdout, stderr)
	}
	saved, exported := readTensors(t, filepath.Join(out, model.AdapterWeightsFile)), readTensors(t, filepath.Join(adir, model.AdapterWeightsFile))
	if !slices.Equal(sortedKeys(saved), sortedKeys(exported)) {
		t.Fatalf("exported adapter tensors %v, the run wrote %v", sortedKeys(exported), sortedKeys(saved))
	}
	for n, v := range saved {
		if !slices.Equal(v, exported[n]) {
			t.Errorf("exported adapter tensor %s differs from the one the run wrote", n)
		}
	}
	if _, err := os.Stat(filepath.Join(adir, "model.safetensors")); err == nil {
		t.Error("export without --merge wrote a full model")
	}

	// --merge: the base with s·B·A added, checked against a float64 merge.
	merged := filepath.Join(t.TempDir(), "merged")
	if stdout, stderr, err := run(t, "checkpoint", "export", "--merge", "--base", snap, "--out", merged, out); err != nil {
		t.Fatalf("checkpoint export --merge: %v\n%s\n%s", err, stdout, stderr)
	}
	wantCfg, _ := model.LoadHFConfig(filepath.Join(snap, "config.json"))
	if got, err := model.LoadHFConfig(filepath.Join(merged, "config.json")); err != nil || got != wantCfg {
		t.Errorf("merged config.json reads as %v (%v), want the base's %v", got, err, wantCfg)
	}
	base, got := readTensors(t, filepath.Join(snap, "model.safetensors")), readTensors(t, filepath.Join(merged, "model.safetensors"))
	if !slices.Equal(sortedKeys(base), sortedKeys(got)) {
		t.Fatalf("merged tensor names %v, want the base's %v", sortedKeys(got), sortedKeys(base))
	}
	var ac struct {
		R      int     `json:"r"`
		Alpha  float64 `json:"lora_alpha"`
		RSLoRA bool    `json:"use_rslora"`
	}
	raw, _ := os.ReadFile(filepath.Join(out, model.AdapterConfigFile))
	if err := json.Unmarshal(raw, &ac); err != nil {
		t.Fatal(err)
	}
	s := ac.Alpha / float64(ac.R)
	if ac.RSLoRA {
		s = ac.Alpha / math.Sqrt(float64(ac.R))
	}
	adapted, worst := 0, 0.0
	for name, w := range base {
		want := make([]float64, len(w))
		for i, v := range w {
			want[i] = float64(v)
		}
		mod := "base_model.model." + strings.TrimSuffix(name, ".weight")
		if A, ok := saved[mod+".lora_A.weight"]; ok {
			B := saved[mod+".lora_B.weight"]
			in, out := len(A)/ac.R, len(B)/ac.R
			for o := range out {
				for i := range in {
					var d float64
					for j := range ac.R {
						d += float64(B[o*ac.R+j]) * float64(A[j*in+i])
					}
					want[o*in+i] += s * d
				}
			}
			adapted++
		}
		for i, v := range got[name] {
			worst = max(worst, math.Abs(float64(v)-want[i]))
		}
	}
	if adapted != 2*5 {
		t.Errorf("the adapter changed %d base tensors, want 10 (5 modules on 2 blocks)", adapted)
	}
	if worst > 1e-6 {
		t.Errorf("merged export differs from the float64 merge by up to %.3g", worst)
	}

	greedy := func(args ...string) string {
		t.Helper()
		sout, serr, err := run(t, append([]string{"sample", "--ids", "--prompt", "5 6 7", "--temperature", "0", "--max-new-tokens", "12"}, args...)...)
		if err != nil {
			t.Fatalf("sample %v: %v\n%s", args, err, serr)
		}
		return strings.TrimSpace(sout)
	}
	b, a, m := greedy("--from", snap), greedy("--from", snap, "--adapter", out), greedy("--from", merged)
	t.Logf("greedy ids: base %q, --adapter %q, merged %q; merge error %.3g", b, a, m, worst)
	if a != m {
		t.Errorf("sample --adapter gives %q, the merged export %q", a, m)
	}
	if a == b {
		t.Errorf("sample --adapter gives the base's ids %q: the adapter was not applied", b)
	}
}

// readTensors is every tensor of a safetensors file as float32.
func readTensors(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	f, err := model.OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	for _, h := range f.Tensors() {
		if out[h.Name], _, err = f.ReadFloat32(h.Name); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
