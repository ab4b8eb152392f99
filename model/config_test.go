package model

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPresetParamCounts(t *testing.T) {
	// Counts with padded vocab and wpe, as llm.c prints them (reference doc
	// §1.1 for d12, the #677 log for d48); the formula is not used here.
	cases := []struct {
		name string
		want int
	}{
		{"gpt2", 124_475_904},
		{"gpt2-xl", 1_557_686_400},
	}
	for _, c := range cases {
		cfg, ok := Preset(c.name)
		if !ok {
			t.Fatalf("preset %s missing", c.name)
		}
		if got := cfg.NumParams(); got != c.want {
			t.Errorf("%s: NumParams = %d, want %d", c.name, got, c.want)
		}
		if got := NewLayout(cfg).NumParams(); got != c.want {
			t.Errorf("%s: layout total = %d, want %d", c.name, got, c.want)
		}
	}
	// The reference doc rounds d24 and d36 to 354.87M and 774.09M.
	for name, approx := range map[string]float64{"gpt2-medium": 354.87e6, "gpt2-large": 774.09e6} {
		cfg, _ := Preset(name)
		if d := math.Abs(float64(cfg.NumParams()) - approx); d > 0.005e6 {
			t.Errorf("%s: NumParams = %d, want ≈ %.2fM", name, cfg.NumParams(), approx/1e6)
		}
	}
}

func TestPresetShapes(t *testing.T) {
	want := map[string][4]int{ // L, NH, C, maxT
		"gpt2-tiny": {4, 4, 256, 256}, "gpt2": {12, 12, 768, 1024}, "gpt2-medium": {24, 16, 1024, 1024},
		"gpt2-large": {36, 20, 1280, 1024}, "gpt2-xl": {48, 25, 1600, 1024},
	}
	gpt2 := 0
	for _, name := range PresetNames() {
		cfg, ok := Preset(name)
		if ok && cfg.Arch != ArchGPT2 {
			continue // TestFamilyPresets
		}
		gpt2++
		w := want[name]
		if !ok || cfg.L != w[0] || cfg.NH != w[1] || cfg.C != w[2] || cfg.MaxT != w[3] || cfg.V != 50257 || cfg.Vp != 50304 {
			t.Errorf("%s = %+v", name, cfg)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(want) != gpt2 {
		t.Errorf("GPT-2 presets %v", PresetNames())
	}
}

func TestPadVocab(t *testing.T) {
	for v, want := range map[int]int{50257: 50304, 128: 128, 129: 256, 1: 128, 11: 128} {
		if got := PadVocab(v); got != want {
			t.Errorf("PadVocab(%d) = %d, want %d", v, got, want)
		}
	}
}

// TestFlopsPerToken checks the formula against counts written out by hand
// from the published shapes: 6 × (weights used in matmuls per token) +
// 6·L·T·NH·HD.
func TestFlopsPerToken(t *testing.T) {
	// gpt2 124M at T=1024: per block qkv 768·2304, proj 768², fc and
	// fc-proj 2·768·3072; the tied head 50304·768 once; wpe, biases and
	// LayerNorms cost no matmul. llm.c's 6N + 6LCT says 8.035e8; this
	// count leaves out wpe (0.79M), the biases and the norms.
	cfg, _ := Preset("gpt2")
	blocks := 12.0 * (768*2304 + 768*768 + 2*768*3072)
	want := 6*(blocks+50304*768) + 6*12*1024*768
	if got := cfg.FlopsPerToken(1024); got != want || math.Abs(got-7.98e8) > 0.01e8 {
		t.Errorf("gpt2 FlopsPerToken(1024) = %.6g, want %.6g (≈ 7.98e8)", got, want)
	}
	// Llama-3.2-1B: hidden 2048, 32 heads of 64, 8 kv heads, intermediate
	// 8192, 16 layers, a tied 128256-row head.
	llama := familyCfg(t, ArchLlama, 2048, 8192, 16, 32, 8, 64, 128256, true)
	blocks = 16.0 * (2048*(32+2*8)*64 + 32*64*2048 + 3*8192*2048)
	want = 6*(blocks+128256*2048) + 6*16*4096*32*64
	if got := llama.FlopsPerToken(4096); got != want {
		t.Errorf("Llama-3.2-1B FlopsPerToken(4096) = %.6g, want %.6g", got, want)
	}
	// Qwen3-8B: untied, head_dim 128 with hidden 4096 and 32 heads.
	qwen := familyCfg(t, ArchQwen3, 4096, 12288, 36, 32, 8, 128, 151936, false)
	blocks = 36.0 * (4096*(32+2*8)*128 + 32*128*4096 + 3*12288*4096)
	want = 6*(blocks+151936*4096) + 6*36*2048*32*128
	if got := qwen.FlopsPerToken(2048); got != want {
		t.Errorf("Qwen3-8B FlopsPerToken(2048) = %.6g, want %.6g", got, want)
	}
}

// gpt2ConfigJSON is Hugging Face's config.json for the 124M model.
const gpt2ConfigJSON = `{
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_layer": 12,
  "n_positions": 1024,
  "resid_pdrop": 0.1,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "vocab_size": 50257
}`

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadHFConfig(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, filepath.Join(dir, "config.json"), gpt2ConfigJSON)
	got, err := LoadHFConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Preset("gpt2")
	if got != want {
		t.Errorf("LoadHFConfig = %+v, want %+v", got, want)
	}
	for _, arg := range []string{path, dir} {
		if c, err := ByName(arg); err != nil || c != want {
			t.Errorf("ByName(%s) = %+v, %v", arg, c, err)
		}
	}
	if c, err := ByName("gpt2-medium"); err != nil || c.C != 1024 {
		t.Errorf("ByName(gpt2-medium) = %+v, %v", c, err)
	}
	if _, err := ByName("gpt5"); err == nil || !strings.Contains(err.Error(), "gpt2-tiny") {
		t.Errorf("ByName(gpt5) error = %v, want one listing the presets", err)
	}
	// Only n_ctx, gelu_pytorch_tanh: still GPT-2.
	alt := strings.Replace(gpt2ConfigJSON, `"n_positions": 1024,`, "", 1)
	alt = strings.Replace(alt, `"gelu_new"`, `"gelu_pytorch_tanh"`, 1)
	if c, err := LoadHFConfig(writeFile(t, filepath.Join(dir, "alt.json"), alt)); err != nil || c != want {
		t.Errorf("n_ctx only: %+v, %v", c, err)
	}
}

func TestLoadHFConfigErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, old, new, key string
	}{
		{"heads", `"n_head": 12`, `"n_head": 5`, "n_head"},
		{"eps", `1e-05`, `1e-06`, "layer_norm_epsilon"},
		{"act", `"gelu_new"`, `"relu"`, "activation_function"},
		{"untied", `"n_layer": 12,`, `"n_layer": 12, "tie_word_embeddings": false,`, "tie_word_embeddings"},
		{"type", `"model_type": "gpt2"`, `"model_type": "llama"`, "model_type"},
		{"missing", `"n_embd": 768,`, ``, "n_embd"},
		{"ctx", `"n_ctx": 1024`, `"n_ctx": 2048`, "n_ctx"},
		{"inner", `"n_layer": 12,`, `"n_layer": 12, "n_inner": 1000,`, "n_inner"},
		{"zero", `"n_layer": 12`, `"n_layer": 0`, "n_layer"},
		{"syntax", `{`, `[`, ""},
	}
	for _, c := range cases {
		body := strings.Replace(gpt2ConfigJSON, c.old, c.new, 1)
		if body == gpt2ConfigJSON {
			t.Fatalf("%s: replacement did not apply", c.name)
		}
		path := writeFile(t, filepath.Join(dir, c.name+".json"), body)
		_, err := LoadHFConfig(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: error %v, want one naming %s and %q", c.name, err, path, c.key)
		}
	}
}

func TestWriteHFConfigRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	for _, cfg := range []Config{GPT2(Config{MaxT: 16, V: 50, Vp: 128, L: 2, NH: 2, C: 16}), mustPreset(t, "gpt2-xl")} {
		if err := WriteHFConfig(path, cfg); err != nil {
			t.Fatal(err)
		}
		got, err := LoadHFConfig(path)
		if err != nil || got != cfg {
			t.Errorf("round trip %+v → %+v, %v", cfg, got, err)
		}
	}
}

func mustPreset(t *testing.T, name string) Config {
	t.Helper()
	cfg, ok := Preset(name)
	if !ok {
		t.Fatalf("no preset %s", name)
	}
	return cfg
}
