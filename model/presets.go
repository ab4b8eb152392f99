package model

import "fmt"

// The Llama-family presets are the published checkpoints' config.json
// (the keys that decide the model; reference: the Hugging Face hub's
// Qwen/Qwen3-*, meta-llama/Llama-3.*, mistralai/Mistral-7B-v0.3), parsed by
// the same ParseHFConfig as a snapshot's, so a preset is exactly the model
// a downloaded snapshot describes and `--model qwen3-14b` needs no files.
// Weights for a preset are random (InitGroup) unless --init-from names a
// snapshot.

// qwen3Preset is a Qwen3 dense model's config.json: head_dim 128, rope_theta
// 1e6, rms_norm_eps 1e-6, 40,960 positions, no sliding window.
func qwen3Preset(hidden, inter, layers, heads int, tied bool) string {
	return fmt.Sprintf(`{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "attention_bias": false,
		"attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
		"hidden_size": %d, "initializer_range": 0.02, "intermediate_size": %d, "max_position_embeddings": 40960,
		"max_window_layers": %d, "num_attention_heads": %d, "num_hidden_layers": %d, "num_key_value_heads": 8,
		"rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
		"tie_word_embeddings": %t, "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
		"vocab_size": 151936}`, hidden, inter, layers, heads, layers, tied)
}

// llama3Preset is a Llama 3.1/3.2 base model's config.json: rope_theta 5e5
// with llama3 scaling, rms_norm_eps 1e-5, 131,072 positions.
func llama3Preset(hidden, inter, layers, heads, headDim int, factor float64, tied bool) string {
	return fmt.Sprintf(`{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "attention_bias": false,
		"attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": %d, "hidden_act": "silu",
		"hidden_size": %d, "initializer_range": 0.02, "intermediate_size": %d, "max_position_embeddings": 131072,
		"mlp_bias": false, "num_attention_heads": %d, "num_hidden_layers": %d, "num_key_value_heads": 8,
		"pretraining_tp": 1, "rms_norm_eps": 1e-05,
		"rope_scaling": {"factor": %g, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
			"original_max_position_embeddings": 8192, "rope_type": "llama3"},
		"rope_theta": 500000.0, "tie_word_embeddings": %t, "torch_dtype": "bfloat16", "use_cache": true,
		"vocab_size": 128256}`, headDim, hidden, inter, heads, layers, factor, tied)
}

// mistral7BPreset is Mistral-7B-v0.3's config.json (full attention:
// sliding_window null).
const mistral7BPreset = `{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "attention_dropout": 0.0,
	"bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
	"intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32, "num_hidden_layers": 32,
	"num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
	"tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true, "vocab_size": 32768}`

// familyPresets lists each Llama-family preset, smallest first within a
// family, with its config.json.
func familyPresets() []struct{ name, json string } {
	return []struct{ name, json string }{
		{"qwen3-0.6b", qwen3Preset(1024, 3072, 28, 16, true)},
		{"qwen3-1.7b", qwen3Preset(2048, 6144, 28, 16, true)},
		{"qwen3-4b", qwen3Preset(2560, 9728, 36, 32, true)},
		{"qwen3-8b", qwen3Preset(4096, 12288, 36, 32, false)},
		{"qwen3-14b", qwen3Preset(5120, 17408, 40, 40, false)},
		{"llama-3.2-1b", llama3Preset(2048, 8192, 16, 32, 64, 32, true)},
		{"llama-3.2-3b", llama3Preset(3072, 8192, 28, 24, 128, 32, true)},
		{"llama-3.1-8b", llama3Preset(4096, 14336, 32, 32, 128, 8, false)},
		{"mistral-7b", mistral7BPreset},
	}
}

// familyPreset parses a Llama-family preset; ok is false for another name.
// The texts are constants that TestFamilyPresets parses, so err is a bug
// in this file.
func familyPreset(name string) (cfg Config, ok bool, err error) {
	for _, p := range familyPresets() {
		if p.name == name {
			cfg, err := ParseHFConfig("preset "+p.name, []byte(p.json))
			return cfg, true, err
		}
	}
	return Config{}, false, nil
}
