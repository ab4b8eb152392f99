package model

import (
	"encoding/json"
	"fmt"

	"github.com/gotrain/gotrain/backend"

	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// hfConfig is the part of a Hugging Face GPT2Config that decides the model's
// shape or numerics. Pointers tell "absent" from zero; other keys are ignored.
type hfConfig struct {
	ModelType        *string  `json:"model_type"`
	NEmbd            *int     `json:"n_embd"`
	NLayer           *int     `json:"n_layer"`
	NHead            *int     `json:"n_head"`
	NPositions       *int     `json:"n_positions"`
	NCtx             *int     `json:"n_ctx"`
	VocabSize        *int     `json:"vocab_size"`
	NInner           *int     `json:"n_inner"`
	LayerNormEps     *float64 `json:"layer_norm_epsilon"`
	Activation       *string  `json:"activation_function"`
	Tie              *bool    `json:"tie_word_embeddings"`
	ScaleAttnWeights *bool    `json:"scale_attn_weights"`
	ScaleByLayerIdx  *bool    `json:"scale_attn_by_inverse_layer_idx"`
	ReorderUpcast    *bool    `json:"reorder_and_upcast_attn"`
}

// maxHFConfigBytes bounds a config.json: real ones are a few KB.
const maxHFConfigBytes = 16 << 20

// LoadHFConfig reads a Hugging Face config.json (ParseHFConfig).
func LoadHFConfig(path string) (Config, error) {
	raw, err := regularfile.Read("model config", path, maxHFConfigBytes)
	if err != nil {
		return Config{}, err
	}
	return ParseHFConfig(path, raw)
}

// ParseHFConfig decodes and validates the content of a config.json; path
// names it in errors. model_type picks the family member: "gpt2" (also
// when absent, as older GPT-2 exports omit it; Vp is V padded to a
// multiple of VocabPad), or "llama", "mistral", "qwen2", "qwen3"
// (parseFamilyConfig). Keys that would change the math away from what
// gotrain computes are refused with the key named. The file is untrusted:
// every size key must be a positive integer of at most MaxDim and the
// model at most MaxParams parameters (Config.Validate), so nothing
// computed from the result can overflow.
func ParseHFConfig(path string, raw []byte) (Config, error) {
	var head struct {
		ModelType *string `json:"model_type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return Config{}, fmt.Errorf("model config %s: %w", path, err)
	}
	if head.ModelType == nil || *head.ModelType == "gpt2" {
		return parseGPT2Config(path, raw)
	}
	arch, ok := parseArch(*head.ModelType)
	if !ok {
		return Config{}, fmt.Errorf(`model config %s: "model_type" is %q; gotrain runs gpt2, llama, mistral, qwen2 and qwen3`, path, *head.ModelType)
	}
	return parseFamilyConfig(path, raw, arch)
}

// parseGPT2Config reads a GPT2Config.
func parseGPT2Config(path string, raw []byte) (Config, error) {
	var h hfConfig
	if err := json.Unmarshal(raw, &h); err != nil {
		return Config{}, fmt.Errorf("model config %s: %w", path, err)
	}
	bad := func(format string, a ...any) (Config, error) {
		return Config{}, fmt.Errorf("model config %s: %s", path, fmt.Sprintf(format, a...))
	}
	need := func(key string, v *int) (int, error) {
		if v == nil {
			return 0, fmt.Errorf("model config %s: missing key %q (GPT2Config always has it)", path, key)
		}
		if *v < 1 || *v > MaxDim {
			return 0, fmt.Errorf("model config %s: %q = %d, want a positive integer of at most %d", path, key, *v, MaxDim)
		}
		return *v, nil
	}
	var cfg Config
	var errs [4]error
	cfg.C, errs[0] = need("n_embd", h.NEmbd)
	cfg.L, errs[1] = need("n_layer", h.NLayer)
	cfg.NH, errs[2] = need("n_head", h.NHead)
	cfg.V, errs[3] = need("vocab_size", h.VocabSize)
	for _, e := range errs {
		if e != nil {
			return Config{}, e
		}
	}
	var err error
	switch {
	case h.NPositions != nil && h.NCtx != nil && *h.NPositions != *h.NCtx:
		return bad(`"n_positions" = %d and "n_ctx" = %d disagree; set both to the context length`, *h.NPositions, *h.NCtx)
	case h.NPositions != nil:
		cfg.MaxT, err = need("n_positions", h.NPositions)
	case h.NCtx != nil:
		cfg.MaxT, err = need("n_ctx", h.NCtx)
	default:
		return bad(`missing key "n_positions" (the context length, e.g. 1024)`)
	}
	if err != nil {
		return Config{}, err
	}
	if cfg.C%cfg.NH != 0 {
		return bad(`"n_embd" = %d is not a multiple of "n_head" = %d; pick n_head so that n_embd %% n_head == 0`, cfg.C, cfg.NH)
	}
	if h.NInner != nil && *h.NInner != 4*cfg.C {
		return bad(`"n_inner" = %d; gotrain's MLP is 4·n_embd = %d wide (set "n_inner" to null or %d)`, *h.NInner, 4*cfg.C, 4*cfg.C)
	}
	if h.LayerNormEps != nil && *h.LayerNormEps != 1e-5 {
		return bad(`"layer_norm_epsilon" = %g; gotrain's LayerNorm uses 1e-5 (set it to 1e-05)`, *h.LayerNormEps)
	}
	if h.Activation != nil && *h.Activation != "gelu_new" && *h.Activation != "gelu_pytorch_tanh" {
		return bad(`"activation_function" = %q; gotrain computes the tanh GELU (want "gelu_new" or "gelu_pytorch_tanh")`, *h.Activation)
	}
	if h.Tie != nil && !*h.Tie {
		return bad(`"tie_word_embeddings" is false; gotrain's GPT-2 ties lm_head to wte (set it to true)`)
	}
	if h.ScaleAttnWeights != nil && !*h.ScaleAttnWeights {
		return bad(`"scale_attn_weights" is false; gotrain scales attention by 1/sqrt(head size) (set it to true)`)
	}
	if h.ScaleByLayerIdx != nil && *h.ScaleByLayerIdx {
		return bad(`"scale_attn_by_inverse_layer_idx" is true; gotrain does not scale attention by layer (set it to false)`)
	}
	if h.ReorderUpcast != nil && *h.ReorderUpcast {
		return bad(`"reorder_and_upcast_attn" is true; not supported (set it to false)`)
	}
	cfg.Vp = PadVocab(cfg.V)
	cfg = GPT2(cfg)
	if err := cfg.check(); err != nil {
		return bad("%v", err)
	}
	return cfg, nil
}

// WriteHFConfig writes cfg as a Hugging Face config.json that transformers
// loads next to an F32 SaveHF safetensors file, and that ParseHFConfig
// reads back to cfg.
func WriteHFConfig(path string, cfg Config) error {
	return WriteHFConfigDType(path, cfg, backend.F32)
}

// WriteHFConfigDType is WriteHFConfig for weights stored as dt: its
// torch_dtype ("float32", "bfloat16" or "float16") is what transformers
// loads the weights as with torch_dtype="auto", so it must say what the
// files hold.
func WriteHFConfigDType(path string, cfg Config, dt backend.DType) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	torchDType, ok := map[backend.DType]string{backend.F32: "float32", backend.BF16: "bfloat16", backend.F16: "float16"}[dt]
	if !ok {
		return fmt.Errorf("write %s: weights stored as %s have no torch_dtype; want fp32, bf16 or fp16", path, dt)
	}
	doc := gpt2ConfigDoc(cfg)
	if cfg.Arch != ArchGPT2 {
		doc = familyConfigDoc(cfg)
	}
	doc["torch_dtype"] = torchDType
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, append(out, '\n')); err != nil {
		return fmt.Errorf("write model config: %w", err)
	}
	return nil
}

// gpt2ConfigDoc is a GPT2Config for cfg.
func gpt2ConfigDoc(cfg Config) map[string]any {
	return map[string]any{
		"architectures":       []string{"GPT2LMHeadModel"},
		"model_type":          "gpt2",
		"activation_function": "gelu_new",
		"n_embd":              cfg.C,
		"n_layer":             cfg.L,
		"n_head":              cfg.NH,
		"n_positions":         cfg.MaxT,
		"n_ctx":               cfg.MaxT,
		"n_inner":             nil,
		"vocab_size":          cfg.V,
		"layer_norm_epsilon":  1e-5,
		"initializer_range":   0.02,
		"tie_word_embeddings": true,
		"scale_attn_weights":  true,
		// GPT-2's last id, <|endoftext|>, starts and ends every document.
		"bos_token_id":                    cfg.V - 1,
		"eos_token_id":                    cfg.V - 1,
		"attn_pdrop":                      0.0,
		"embd_pdrop":                      0.0,
		"resid_pdrop":                     0.0,
		"torch_dtype":                     "float32",
		"use_cache":                       true,
		"reorder_and_upcast_attn":         false,
		"scale_attn_by_inverse_layer_idx": false,
	}
}
