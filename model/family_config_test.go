package model

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// familyJSON is a config.json of model_type arch with the given shape.
func familyJSON(arch Arch, hidden, inter, layers, heads, kv, hd, vocab int, tied bool) string {
	return fmt.Sprintf(`{"model_type": %q, "hidden_size": %d, "intermediate_size": %d, "num_hidden_layers": %d,
		"num_attention_heads": %d, "num_key_value_heads": %d, "head_dim": %d, "vocab_size": %d,
		"tie_word_embeddings": %v, "max_position_embeddings": 4096, "rope_theta": 500000.0}`,
		arch, hidden, inter, layers, heads, kv, hd, vocab, tied)
}

// familyCfg parses familyJSON (qwen2 has no head_dim key: hd must be
// hidden/heads).
func familyCfg(t *testing.T, arch Arch, hidden, inter, layers, heads, kv, hd, vocab int, tied bool) Config {
	t.Helper()
	raw := familyJSON(arch, hidden, inter, layers, heads, kv, hd, vocab, tied)
	if arch == ArchQwen2 {
		raw = strings.Replace(raw, fmt.Sprintf(`"head_dim": %d, `, hd), "", 1)
	}
	cfg, err := ParseHFConfig("test/config.json", []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPublishedParamCounts: the layout of published shapes holds exactly
// the parameters the reference computes for them (the tied embedding
// counted once; Qwen3-1.7B's equals its index's total_parameters).
func TestPublishedParamCounts(t *testing.T) {
	cases := []struct {
		name                                        string
		arch                                        Arch
		hidden, inter, layers, heads, kv, hd, vocab int
		tied                                        bool
		want                                        int
	}{
		{"Qwen3-0.6B", ArchQwen3, 1024, 3072, 28, 16, 8, 128, 151936, true, 596_049_920},
		{"Qwen3-1.7B", ArchQwen3, 2048, 6144, 28, 16, 8, 128, 151936, true, 1_720_574_976},
		{"Qwen3-4B", ArchQwen3, 2560, 9728, 36, 32, 8, 128, 151936, true, 4_022_468_096},
		{"Qwen3-8B", ArchQwen3, 4096, 12288, 36, 32, 8, 128, 151936, false, 8_190_735_360},
		{"Qwen3-14B", ArchQwen3, 5120, 17408, 40, 40, 8, 128, 151936, false, 14_768_307_200},
		{"Llama-3.2-1B", ArchLlama, 2048, 8192, 16, 32, 8, 64, 128256, true, 1_235_814_400},
		{"Llama-3.2-3B", ArchLlama, 3072, 8192, 28, 24, 8, 128, 128256, true, 3_212_749_824},
		{"Llama-3.1-8B", ArchLlama, 4096, 14336, 32, 32, 8, 128, 128256, false, 8_030_261_248},
		{"Mistral-7B-v0.3", ArchMistral, 4096, 14336, 32, 32, 8, 128, 32768, false, 7_248_023_552},
	}
	for _, c := range cases {
		cfg := familyCfg(t, c.arch, c.hidden, c.inter, c.layers, c.heads, c.kv, c.hd, c.vocab, c.tied)
		if got := cfg.NumParams(); got != c.want {
			t.Errorf("%s: %d parameters, want %d", c.name, got, c.want)
		}
		// Tensor counts: 1 + 9L + 1 (+ 2L q/k norms for Qwen3, + lm_head untied).
		want := 2 + 9*c.layers
		if c.arch == ArchQwen3 {
			want += 2 * c.layers
		}
		if !c.tied {
			want++
		}
		if got := len(NewLayout(cfg).Tensors()); got != want {
			t.Errorf("%s: %d tensors, want %d", c.name, got, want)
		}
	}
}

// fixtureDir is one Llama-family PyTorch fixture case.
func fixtureDir(name string) string { return filepath.Join("testdata", "llama_tiny", name) }

// TestFamilyConfigFixtures reads every fixture's config.json to the model
// its README describes, and each config_v5.json (rope_parameters form) to
// the same Config.
func TestFamilyConfigFixtures(t *testing.T) {
	base := Config{MaxT: 128, V: 97, Vp: 97, L: 2, C: 32, NH: 4, KV: 2, HD: 8, FF: 48,
		Norm: RMSNorm, NormEps: 1e-5, Act: SwiGLU, Pos: RotaryPositions, Rope: Rope{Theta: 1e4},
		InitStd: 0.02, BOS: 1, EOS: TokenIDs{N: 1, IDs: [MaxEOS]int{2}}, PadID: -1}
	with := func(f func(*Config)) Config { c := base; f(&c); return c }
	want := map[string]Config{
		"llama_gqa": with(func(c *Config) { c.Arch, c.HFClass = ArchLlama, "LlamaForCausalLM" }),
		"llama_mqa_llama3rope": with(func(c *Config) {
			c.Arch, c.HFClass, c.KV, c.MaxT, c.TiedHead = ArchLlama, "LlamaForCausalLM", 1, 8192, true
			c.QKVBias, c.OBias, c.MLPBias = true, true, true
			c.Rope = Rope{Theta: 1e4, Scaling: RopeLlama3, Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OrigMaxT: 1024}
			c.EOS = TokenIDs{N: 2, IDs: [MaxEOS]int{2, 3}}
		}),
		"llama_linear_rope": with(func(c *Config) {
			c.Arch, c.HFClass, c.MaxT = ArchLlama, "LlamaForCausalLM", 256
			c.Rope = Rope{Theta: 1e4, Scaling: RopeLinear, Factor: 2}
		}),
		"qwen2_bias": with(func(c *Config) {
			c.Arch, c.HFClass, c.NormEps, c.Rope.Theta, c.TiedHead, c.QKVBias = ArchQwen2, "Qwen2ForCausalLM", 1e-6, 1e6, true, true
		}),
		"qwen3_qknorm": with(func(c *Config) {
			c.Arch, c.HFClass, c.NormEps, c.Rope.Theta, c.TiedHead, c.QKNorm, c.HD = ArchQwen3, "Qwen3ForCausalLM", 1e-6, 1e6, true, true, 16
		}),
		"mistral": with(func(c *Config) { c.Arch, c.HFClass, c.Rope.Theta = ArchMistral, "MistralForCausalLM", 1e6 }),
	}
	for name, w := range want {
		got, err := LoadHFConfig(filepath.Join(fixtureDir(name), "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
		v5 := filepath.Join(fixtureDir(name), "config_v5.json")
		if _, err := os.Stat(v5); err == nil {
			if got5, err := LoadHFConfig(v5); err != nil || got5 != w {
				t.Errorf("%s config_v5.json: %+v, %v", name, got5, err)
			}
		}
		// Written back and read again: the same model.
		path := filepath.Join(t.TempDir(), "config.json")
		if err := WriteHFConfig(path, got); err != nil {
			t.Fatal(err)
		}
		if back, err := LoadHFConfig(path); err != nil || back != got {
			t.Errorf("%s round trip: %+v, %v", name, back, err)
		}
	}
}

// TestFamilyConfigDefaults: keys absent from config.json take the
// configuration classes' defaults, including qwen3's head_dim of 128
// (not hidden/heads) and a null num_key_value_heads meaning one per head.
func TestFamilyConfigDefaults(t *testing.T) {
	parse := func(raw string) Config {
		t.Helper()
		cfg, err := ParseHFConfig("d/config.json", []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	q3 := parse(`{"model_type": "qwen3", "hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8,
		"num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 300}`)
	if q3.HD != 128 || q3.AttnWidth() != 2048 || q3.Rope.Theta != 10000 || q3.NormEps != 1e-6 || q3.TiedHead || q3.BOS != -1 || q3.EOS.N != 0 {
		t.Errorf("qwen3 defaults: %+v", q3)
	}
	ll := parse(`{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": null,
		"num_hidden_layers": 1, "intermediate_size": 96, "vocab_size": 50}`)
	if ll.KV != 4 || ll.HD != 16 || ll.MaxT != 2048 || ll.BOS != 1 || ll.EOS.List()[0] != 2 || ll.PadID != -1 || ll.QKVBias || ll.MLPBias {
		t.Errorf("llama defaults: %+v", ll)
	}
	mi := parse(`{"model_type": "mistral", "hidden_size": 64, "num_attention_heads": 8,
		"num_hidden_layers": 1, "intermediate_size": 96, "vocab_size": 50}`)
	if mi.KV != 8 || mi.SlidingWindow != 4096 || mi.MaxT != 131072 {
		t.Errorf("mistral defaults: %+v", mi)
	}
	pad := parse(`{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
		"num_hidden_layers": 1, "intermediate_size": 96, "vocab_size": 50, "pad_token_id": -1}`)
	if pad.PadID != 49 {
		t.Errorf("pad_token_id -1 is nn.Embedding's last row, got %d", pad.PadID)
	}
}

// TestFamilyConfigErrors: every value gotrain cannot honour is refused
// with the key named.
func TestFamilyConfigErrors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtureDir("llama_mqa_llama3rope"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	llama := string(raw)
	qwen, err := os.ReadFile(filepath.Join(fixtureDir("qwen2_bias"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, base, old, new string
		say                  []string
	}{
		{"yarn", llama, `"rope_type": "llama3"`, `"rope_type": "yarn"`, []string{"rope_scaling.rope_type", "yarn"}},
		{"legacy type", llama, `"rope_type": "llama3"`, `"type": "dynamic"`, []string{"rope_scaling.type", "dynamic"}},
		{"act", llama, `"silu"`, `"gelu"`, []string{"hidden_act", "gelu"}},
		{"dropout", llama, `"attention_dropout": 0.0`, `"attention_dropout": 0.1`, []string{"attention_dropout"}},
		{"tp", llama, `"pretraining_tp": 1`, `"pretraining_tp": 2`, []string{"pretraining_tp"}},
		{"partial", llama, `"pretraining_tp": 1`, `"pretraining_tp": 1, "partial_rotary_factor": 0.5`, []string{"partial_rotary_factor"}},
		{"odd head", llama, `"head_dim": 8`, `"head_dim": 7`, []string{"head_dim", "odd"}},
		{"heads vs hidden", llama, `"head_dim": 8,`, ``, []string{}},
		{"kv", llama, `"num_key_value_heads": 1`, `"num_key_value_heads": 3`, []string{"num_key_value_heads", "num_attention_heads"}},
		{"low/high", llama, `"high_freq_factor": 4.0`, `"high_freq_factor": 0.5`, []string{"high_freq_factor"}},
		{"no factor", llama, `"factor": 8.0,`, ``, []string{"rope_scaling.factor"}},
		{"vocab", llama, `"vocab_size": 97`, `"vocab_size": 9223372036854775807`, []string{"vocab_size", "9223372036854775807"}},
		{"zero layers", llama, `"num_hidden_layers": 2`, `"num_hidden_layers": 0`, []string{"num_hidden_layers"}},
		{"too big", llama, `"num_hidden_layers": 2`, `"num_hidden_layers": 16000000, "hidden_size": 16000000, "head_dim": 2`, []string{"num_hidden_layers = 16000000", "parameters"}},
		{"sliding", string(qwen), `"use_sliding_window": false`, `"use_sliding_window": true`, []string{"use_sliding_window"}},
		{"layer types", string(qwen), `"use_sliding_window": false`, `"use_sliding_window": false, "layer_types": ["full_attention", "sliding_attention"]`, []string{"layer_types"}},
		{"qwen2 head_dim", string(qwen), `"use_sliding_window": false`, `"use_sliding_window": false, "head_dim": 16`, []string{"head_dim"}},
		{"both rope forms", llama, `"pretraining_tp": 1`, `"pretraining_tp": 1, "rope_parameters": {"rope_type": "default"}`, []string{"rope_parameters", "rope_scaling"}},
		{"quantized", llama, `"pretraining_tp": 1`, `"pretraining_tp": 1, "quantization_config": {"bits": 4}`, []string{"quantization_config"}},
		{"class", llama, `"LlamaForCausalLM"`, `"LlamaForSequenceClassification"`, []string{"architectures"}},
		{"type", llama, `"model_type": "llama"`, `"model_type": "gemma"`, []string{"model_type", "gemma"}},
		{"eps", llama, `"rms_norm_eps": 1e-05`, `"rms_norm_eps": -1`, []string{"rms_norm_eps"}},
		{"not an int", llama, `"num_attention_heads": 4`, `"num_attention_heads": 4.5`, []string{"num_attention_heads"}},
	}
	for _, c := range cases {
		body := strings.Replace(c.base, c.old, c.new, 1)
		if body == c.base {
			t.Fatalf("%s: replacement did not apply", c.name)
		}
		_, err := ParseHFConfig("snap/config.json", []byte(body))
		if c.name == "heads vs hidden" {
			// Without head_dim the head size is hidden/heads = 8: valid.
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range append(c.say, "snap/config.json") {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
	}
}

// TestCheckSeqLen: Mistral's sliding window refuses a longer sequence, as
// full causal attention would differ from it; the model refuses it too.
func TestCheckSeqLen(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(fixtureDir("mistral"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(raw), `"sliding_window": null`, `"sliding_window": 6`, 1)
	cfg, err := ParseHFConfig("m/config.json", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SlidingWindow != 6 {
		t.Fatalf("sliding window %d", cfg.SlidingWindow)
	}
	if err := cfg.CheckSeqLen(6); err != nil {
		t.Errorf("T = window: %v", err)
	}
	if err := cfg.CheckSeqLen(7); err == nil || !strings.Contains(err.Error(), "sliding_window 6") {
		t.Errorf("T = 7 past the window: %v", err)
	}
	if err := cfg.CheckSeqLen(129); err == nil || !strings.Contains(err.Error(), "max_position_embeddings") {
		t.Errorf("T past max_position_embeddings: %v", err)
	}
	m := newModel(t, cfg, InitParams(cfg, 1), Options{})
	if _, err := m.Forward(make([]int32, 7), nil, 1, 7); err == nil || !strings.Contains(err.Error(), "sliding_window") {
		t.Errorf("Forward past the window: %v", err)
	}
	if _, err := m.Forward(make([]int32, 6), nil, 1, 6); err != nil {
		t.Errorf("Forward within the window: %v", err)
	}
}

// TestFamilyPresets: every Llama-family preset has exactly the published
// shape (the reference's parameter-count checksums) and survives a
// config.json round trip unchanged.
func TestFamilyPresets(t *testing.T) {
	want := map[string]int{
		"qwen3-0.6b": 596_049_920, "qwen3-1.7b": 1_720_574_976, "qwen3-4b": 4_022_468_096,
		"qwen3-8b": 8_190_735_360, "qwen3-14b": 14_768_307_200, "llama-3.2-1b": 1_235_814_400,
		"llama-3.2-3b": 3_212_749_824, "llama-3.1-8b": 8_030_261_248, "mistral-7b": 7_248_023_552,
	}
	seen := 0
	for _, name := range PresetNames() {
		cfg, ok := Preset(name)
		if !ok {
			_, _, err := familyPreset(name)
			t.Fatalf("preset %s does not parse: %v", name, err)
		}
		if cfg.Arch == ArchGPT2 {
			continue
		}
		seen++
		if got, ok := want[name]; !ok || cfg.NumParams() != got {
			t.Errorf("%s: %d parameters, published %d", name, cfg.NumParams(), got)
		}
		path := filepath.Join(t.TempDir(), "config.json")
		if err := WriteHFConfig(path, cfg); err != nil {
			t.Fatal(err)
		}
		back, err := LoadHFConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if back != cfg {
			t.Errorf("%s: config.json round trip gives %+v, want %+v", name, back, cfg)
		}
		if byName, err := ByName(name); err != nil || byName != cfg {
			t.Errorf("ByName(%q) = %v, %v; want the preset", name, byName, err)
		}
	}
	if seen != len(want) {
		t.Errorf("%d Llama-family presets, want %d", seen, len(want))
	}
	q, _ := Preset("qwen3-0.6b")
	if q.HD != 128 || q.NH*q.HD == q.C || !q.TiedHead || !q.QKNorm || q.MaxT != 40960 {
		t.Errorf("qwen3-0.6b: %v: want head_dim 128 (q_proj 2048 wide on a 1024 model), tied, q/k norms, 40960 positions", q)
	}
	l, _ := Preset("llama-3.1-8b")
	if l.Rope.Scaling != RopeLlama3 || l.Rope.Factor != 8 || l.Rope.OrigMaxT != 8192 || l.TiedHead {
		t.Errorf("llama-3.1-8b: rope %+v tied %v: want llama3 scaling, factor 8, original 8192, untied", l.Rope, l.TiedHead)
	}
}
