package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// TestHFNumParamsAndTrainableLine: the counts are transformers'
// num_parameters() of the published models (GPT2LMHeadModel "gpt2":
// 124,439,808; Llama-3.2-1B: 1,235,814,400, tied head counted once), and
// the line is PEFT's print_trainable_parameters for LoraConfig(r=8,
// target_modules=["c_attn"]) on gpt2: 12 blocks × 8·(768 + 2304) adapter
// weights.
func TestHFNumParamsAndTrainableLine(t *testing.T) {
	for name, want := range map[string]int{"gpt2": 124_439_808, "llama-3.2-1b": 1_235_814_400} {
		cfg, ok := Preset(name)
		if !ok {
			t.Fatalf("no preset %s", name)
		}
		if got := HFNumParams(cfg); got != want {
			t.Errorf("%s: HFNumParams %d, transformers counts %d", name, got, want)
		}
	}
	cfg, _ := Preset("gpt2")
	alay, err := NewAdapterLayout(cfg, LoRA{R: 8, Alpha: DefaultLoRAAlpha, Target: []string{"c_attn"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "trainable params: 294,912 || all params: 124,734,720 || trainable%: 0.2364"
	if got := TrainableParamsLine(alay); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestSnapshotDType: torch_dtype, then transformers v5's dtype, then the
// stored tensors' dtype when config.json names no float type.
func TestSnapshotDType(t *testing.T) {
	src := filepath.Join("testdata", "llama_tiny", "llama_linear_rope") // BF16 shards, torch_dtype bfloat16
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if dt, err := SnapshotDType(src); err != nil || dt != backend.BF16 {
		t.Errorf("torch_dtype bfloat16: %v, %v", dt, err)
	}
	dir := t.TempDir()
	for _, f := range []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	for _, tc := range []struct {
		from, to string
		want     backend.DType
	}{
		{`"torch_dtype": "bfloat16"`, `"dtype": "float16"`, backend.F16},
		{`"torch_dtype": "bfloat16"`, `"torch_dtype": "auto"`, backend.BF16},
		{`"torch_dtype": "bfloat16",`, ``, backend.BF16},
	} {
		edited := []byte(replaceOnce(t, string(raw), tc.from, tc.to))
		os.WriteFile(filepath.Join(dir, "config.json"), edited, 0o644)
		if dt, err := SnapshotDType(dir); err != nil || dt != tc.want {
			t.Errorf("config.json with %q: %v, %v; want %v", tc.to, dt, err, tc.want)
		}
	}
}

func replaceOnce(t *testing.T, s, from, to string) string {
	t.Helper()
	i := strings.Index(s, from)
	if i < 0 {
		t.Fatalf("%q not in the fixture's config.json", from)
	}
	return s[:i] + to + s[i+len(from):]
}
