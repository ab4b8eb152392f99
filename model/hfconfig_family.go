package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// familyDefaults are the configuration classes' defaults for a key absent
// from config.json (LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config).
type familyDefaults struct {
	vocab, hidden, inter, layers, heads, kv, maxPos int // kv 0: num_attention_heads
	headDim                                         int // 0: hidden/heads
	slidingWindow                                   int // mistral's default window; 0: none
	bos, eos                                        int // -1: not set by the class
}

func defaultsFor(a Arch) familyDefaults {
	switch a {
	case ArchMistral:
		return familyDefaults{vocab: 32000, hidden: 4096, inter: 14336, layers: 32, heads: 32, kv: 8, maxPos: 4096 * 32, slidingWindow: 4096, bos: 1, eos: 2}
	case ArchQwen2:
		return familyDefaults{vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kv: 32, maxPos: 32768, bos: -1, eos: -1}
	case ArchQwen3:
		return familyDefaults{vocab: 151936, hidden: 4096, inter: 22016, layers: 32, heads: 32, kv: 32, maxPos: 32768, headDim: 128, bos: -1, eos: -1}
	}
	return familyDefaults{vocab: 32000, hidden: 4096, inter: 11008, layers: 32, heads: 32, maxPos: 2048, bos: 1, eos: 2}
}

// jsonObj is one JSON object by key, so absent keys and nulls can be told
// apart from values; its getters name the key in every error.
type jsonObj struct {
	prefix string // "rope_scaling." for a nested object
	m      map[string]json.RawMessage
}

func decodeObj(raw []byte, prefix string) (jsonObj, error) {
	o := jsonObj{prefix: prefix}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&o.m); err != nil {
		return o, err
	}
	if o.m == nil {
		return o, fmt.Errorf("%s is null, want an object", strings.TrimSuffix(prefix, "."))
	}
	return o, nil
}

// has reports a key present and not null.
func (o jsonObj) has(k string) bool {
	v, ok := o.m[k]
	return ok && string(bytes.TrimSpace(v)) != "null"
}

func (o jsonObj) name(k string) string { return fmt.Sprintf("%q", o.prefix+k) }

// number decodes key k as a JSON number; def when absent or null.
func (o jsonObj) number(k string, def float64) (float64, error) {
	if !o.has(k) {
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(o.m[k], &n); err != nil {
		return 0, fmt.Errorf("%s is %s, want a number", o.name(k), o.m[k])
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s = %s is not a finite number", o.name(k), n)
	}
	return f, nil
}

// integer decodes key k as an integer in [lo, hi]; def when absent or null.
func (o jsonObj) integer(k string, def, lo, hi int) (int, error) {
	if !o.has(k) {
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(o.m[k], &n); err != nil {
		return 0, fmt.Errorf("%s is %s, want an integer", o.name(k), o.m[k])
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		// 32.0 is an integer to Python's json.
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, fmt.Errorf("%s = %s, want an integer in [%d, %d]", o.name(k), n, lo, hi)
		}
		v = int64(f)
	}
	if v < int64(lo) || v > int64(hi) {
		return 0, fmt.Errorf("%s = %d, want an integer in [%d, %d]", o.name(k), v, lo, hi)
	}
	return int(v), nil
}

func (o jsonObj) boolean(k string, def bool) (bool, error) {
	if !o.has(k) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(o.m[k], &b); err != nil {
		return false, fmt.Errorf("%s is %s, want true or false", o.name(k), o.m[k])
	}
	return b, nil
}

func (o jsonObj) str(k, def string) (string, error) {
	if !o.has(k) {
		return def, nil
	}
	var s string
	if err := json.Unmarshal(o.m[k], &s); err != nil {
		return "", fmt.Errorf("%s is %s, want a string", o.name(k), o.m[k])
	}
	return s, nil
}

// parseFamilyConfig reads a LlamaConfig, MistralConfig, Qwen2Config or
// Qwen3Config: the keys of the reference table with the classes'
// defaults, head_dim's rules (qwen3's default is 128, not hidden/heads),
// RoPE in either form (v4's rope_theta + rope_scaling, v5's
// rope_parameters), and a refusal naming the key for every value gotrain
// cannot honour.
func parseFamilyConfig(path string, raw []byte, arch Arch) (Config, error) {
	cfg, err := familyConfig(raw, arch)
	if err != nil {
		return Config{}, fmt.Errorf("model config %s (%s): %w", path, arch, err)
	}
	return cfg, nil
}

func familyConfig(raw []byte, arch Arch) (Config, error) {
	o, err := decodeObj(raw, "")
	if err != nil {
		return Config{}, err
	}
	d := defaultsFor(arch)
	cfg := Config{Arch: arch, Norm: RMSNorm, Act: SwiGLU, Pos: RotaryPositions}
	var errs []error
	geti := func(dst *int, k string, def int) {
		v, err := o.integer(k, def, 1, MaxDim)
		*dst = v
		errs = append(errs, err)
	}
	geti(&cfg.V, "vocab_size", d.vocab)
	geti(&cfg.C, "hidden_size", d.hidden)
	geti(&cfg.FF, "intermediate_size", d.inter)
	geti(&cfg.L, "num_hidden_layers", d.layers)
	geti(&cfg.NH, "num_attention_heads", d.heads)
	geti(&cfg.MaxT, "max_position_embeddings", d.maxPos)
	for _, e := range errs {
		if e != nil {
			return Config{}, e
		}
	}
	cfg.Vp = cfg.V
	// num_key_value_heads: null means one per query head; absent, the
	// class default (also one per query head where it has none).
	kvDef := d.kv
	if kvDef == 0 || (o.m["num_key_value_heads"] != nil && !o.has("num_key_value_heads")) {
		kvDef = cfg.NH
	}
	if cfg.KV, err = o.integer("num_key_value_heads", kvDef, 1, MaxDim); err != nil {
		return Config{}, err
	}
	if cfg.NH%cfg.KV != 0 {
		return Config{}, fmt.Errorf(`"num_attention_heads" = %d is not a multiple of "num_key_value_heads" = %d`, cfg.NH, cfg.KV)
	}
	if cfg.HD, err = headDim(o, arch, d, cfg.C, cfg.NH); err != nil {
		return Config{}, err
	}

	act, err := o.str("hidden_act", "silu")
	if err != nil {
		return Config{}, err
	}
	if act != "silu" {
		return Config{}, fmt.Errorf(`"hidden_act" is %q; gotrain's %s MLP is SwiGLU, down(silu(gate)·up) (want "silu")`, act, arch)
	}
	if cfg.NormEps, err = o.number("rms_norm_eps", 1e-6); err != nil {
		return Config{}, err
	}
	if !(cfg.NormEps > 0) {
		return Config{}, fmt.Errorf(`"rms_norm_eps" = %g, want a positive number`, cfg.NormEps)
	}
	if cfg.InitStd, err = o.number("initializer_range", InitStd); err != nil {
		return Config{}, err
	}
	if cfg.TiedHead, err = o.boolean("tie_word_embeddings", false); err != nil {
		return Config{}, err
	}
	if err := familyBiases(o, arch, &cfg); err != nil {
		return Config{}, err
	}
	if err := refuseUnsupported(o, arch, &cfg); err != nil {
		return Config{}, err
	}
	if cfg.Rope, err = ropeOf(o, cfg.MaxT); err != nil {
		return Config{}, err
	}
	if err := specialTokens(o, d, &cfg); err != nil {
		return Config{}, err
	}
	if cfg.HFClass, err = hfClass(o, arch); err != nil {
		return Config{}, err
	}
	if err := cfg.check(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// headDim applies the reference's head_dim rules: head_dim when set (qwen2
// has no such field, so a value there must agree with hidden/heads),
// else qwen3's class default 128, else hidden/heads, which must divide.
func headDim(o jsonObj, arch Arch, d familyDefaults, C, NH int) (int, error) {
	hd, err := o.integer("head_dim", 0, 1, MaxDim)
	if err != nil {
		return 0, err
	}
	switch {
	case arch == ArchQwen2 && hd != 0 && hd*NH != C:
		return 0, fmt.Errorf(`"head_dim" = %d, but qwen2's head size is hidden_size/num_attention_heads = %d/%d (Qwen2Config has no head_dim); remove the key`, hd, C, NH)
	case hd != 0:
	case d.headDim != 0:
		hd = d.headDim
	case C%NH != 0:
		return 0, fmt.Errorf(`"hidden_size" = %d is not a multiple of "num_attention_heads" = %d, and no "head_dim" says the head size`, C, NH)
	default:
		hd = C / NH
	}
	if hd%2 != 0 {
		return 0, fmt.Errorf(`head size ("head_dim") = %d is odd; RoPE rotates pairs of channels`, hd)
	}
	return hd, nil
}

// familyBiases sets the biases and norms each model_type has: llama's
// attention_bias (q, k, v and o) and mlp_bias; mistral none; qwen2 q, k
// and v always, o never; qwen3 attention_bias and its q/k norms.
func familyBiases(o jsonObj, arch Arch, cfg *Config) error {
	var err error
	switch arch {
	case ArchLlama:
		if cfg.QKVBias, err = o.boolean("attention_bias", false); err != nil {
			return err
		}
		cfg.OBias = cfg.QKVBias
		if cfg.MLPBias, err = o.boolean("mlp_bias", false); err != nil {
			return err
		}
	case ArchQwen2:
		cfg.QKVBias = true
	case ArchQwen3:
		if cfg.QKVBias, err = o.boolean("attention_bias", false); err != nil {
			return err
		}
		cfg.OBias, cfg.QKNorm = cfg.QKVBias, true
	}
	return nil
}

// refuseUnsupported names the keys whose values would change the math
// away from what gotrain computes, and records Mistral's window.
func refuseUnsupported(o jsonObj, arch Arch, cfg *Config) error {
	if p, err := o.number("attention_dropout", 0); err != nil {
		return err
	} else if p != 0 {
		return fmt.Errorf(`"attention_dropout" = %g; gotrain trains without dropout (set it to 0.0)`, p)
	}
	if tp, err := o.integer("pretraining_tp", 1, math.MinInt32, math.MaxInt32); err != nil {
		return err
	} else if tp != 1 {
		return fmt.Errorf(`"pretraining_tp" = %d; gotrain computes each projection as one matmul (set it to 1)`, tp)
	}
	if f, err := o.number("partial_rotary_factor", 1); err != nil {
		return err
	} else if f != 1 {
		return fmt.Errorf(`"partial_rotary_factor" = %g; gotrain rotates the whole head (want 1.0)`, f)
	}
	if o.has("quantization_config") {
		return fmt.Errorf(`"quantization_config" is set; gotrain trains unquantized F32/BF16/F16 weights (use the unquantized checkpoint)`)
	}
	switch arch {
	case ArchMistral:
		w, err := o.integer("sliding_window", defaultsFor(arch).slidingWindow, 1, math.MaxInt32)
		if err != nil {
			return err
		}
		if o.m["sliding_window"] != nil && !o.has("sliding_window") {
			w = 0 // null: full attention
		}
		cfg.SlidingWindow = w
	case ArchQwen2, ArchQwen3:
		if on, err := o.boolean("use_sliding_window", false); err != nil {
			return err
		} else if on {
			return fmt.Errorf(`"use_sliding_window" is true; gotrain computes full causal attention in every layer (set it to false)`)
		}
	}
	if o.has("layer_types") {
		var types []string
		if err := json.Unmarshal(o.m["layer_types"], &types); err != nil {
			return fmt.Errorf(`"layer_types" is %s, want a list of strings`, o.m["layer_types"])
		}
		if len(types) != cfg.L {
			return fmt.Errorf(`"layer_types" lists %d layers, but "num_hidden_layers" is %d`, len(types), cfg.L)
		}
		for i, t := range types {
			if t != "full_attention" {
				return fmt.Errorf(`"layer_types"[%d] is %q; gotrain computes full causal attention in every layer (want "full_attention")`, i, t)
			}
		}
	}
	return nil
}

// ropeOf reads RoPE's parameters from either form: v4's top-level
// rope_theta with rope_scaling (null or a dict whose variant is
// "rope_type", or the legacy "type"), or v5's rope_parameters holding
// rope_theta, rope_type and the variant's keys. llama3's
// original_max_position_embeddings falls back to the top-level key of that
// name, then to max_position_embeddings, as transformers fills it.
func ropeOf(o jsonObj, maxT int) (Rope, error) {
	theta, err := o.number("rope_theta", 10000)
	if err != nil {
		return Rope{}, err
	}
	var sc jsonObj
	switch {
	case o.has("rope_parameters") && o.has("rope_scaling"):
		return Rope{}, fmt.Errorf(`both "rope_parameters" and "rope_scaling" are set; keep one (transformers v5 writes rope_parameters)`)
	case o.has("rope_parameters"):
		if sc, err = decodeObj(o.m["rope_parameters"], "rope_parameters."); err != nil {
			return Rope{}, fmt.Errorf(`"rope_parameters": %v`, err)
		}
		if sc.has("rope_theta") {
			inner, err := sc.number("rope_theta", 0)
			if err != nil {
				return Rope{}, err
			}
			if o.has("rope_theta") && inner != theta {
				return Rope{}, fmt.Errorf(`"rope_theta" = %g and "rope_parameters.rope_theta" = %g disagree`, theta, inner)
			}
			theta = inner
		}
	case o.has("rope_scaling"):
		if sc, err = decodeObj(o.m["rope_scaling"], "rope_scaling."); err != nil {
			return Rope{}, fmt.Errorf(`"rope_scaling": %v`, err)
		}
	}
	r := Rope{Theta: theta}
	if !(theta > 0) {
		return Rope{}, fmt.Errorf(`"rope_theta" = %g, want a positive number`, theta)
	}
	if sc.m == nil {
		return r, nil
	}
	kindKey := "rope_type"
	if !sc.has(kindKey) && sc.has("type") {
		kindKey = "type" // the legacy name
	}
	kind, err := sc.str(kindKey, "default")
	if err != nil {
		return Rope{}, err
	}
	if f, err := sc.number("partial_rotary_factor", 1); err != nil {
		return Rope{}, err
	} else if f != 1 {
		return Rope{}, fmt.Errorf(`"%spartial_rotary_factor" = %g; gotrain rotates the whole head (want 1.0)`, sc.prefix, f)
	}
	if af, err := sc.number("attention_factor", 1); err != nil {
		return Rope{}, err
	} else if af != 1 {
		return Rope{}, fmt.Errorf(`"%sattention_factor" = %g; gotrain's RoPE variants scale cos and sin by 1 (remove the key)`, sc.prefix, af)
	}
	positive := func(k string) (float64, error) {
		if !sc.has(k) {
			return 0, fmt.Errorf(`%s is missing; %s RoPE needs it`, sc.name(k), kind)
		}
		v, err := sc.number(k, 0)
		if err == nil && !(v > 0) {
			err = fmt.Errorf(`%s = %g, want a positive number`, sc.name(k), v)
		}
		return v, err
	}
	switch kind {
	case "default":
		return r, nil
	case "linear":
		r.Scaling = RopeLinear
		r.Factor, err = positive("factor")
		return r, err
	case "llama3":
		r.Scaling = RopeLlama3
		if r.Factor, err = positive("factor"); err != nil {
			return Rope{}, err
		}
		if r.LowFreqFactor, err = positive("low_freq_factor"); err != nil {
			return Rope{}, err
		}
		if r.HighFreqFactor, err = positive("high_freq_factor"); err != nil {
			return Rope{}, err
		}
		if !(r.HighFreqFactor > r.LowFreqFactor) {
			return Rope{}, fmt.Errorf(`"%shigh_freq_factor" = %g is not above "low_freq_factor" = %g`, sc.prefix, r.HighFreqFactor, r.LowFreqFactor)
		}
		orig, err := o.integer("original_max_position_embeddings", maxT, 1, MaxDim)
		if err != nil {
			return Rope{}, err
		}
		if r.OrigMaxT, err = sc.integer("original_max_position_embeddings", orig, 1, MaxDim); err != nil {
			return Rope{}, err
		}
		return r, nil
	}
	return Rope{}, fmt.Errorf(`%s is %q; gotrain implements the default, linear and llama3 RoPE variants`, sc.name(kindKey), kind)
}

// specialTokens reads bos_token_id, eos_token_id (an id or a list) and
// pad_token_id; pad_token_id may count from the end, as nn.Embedding's
// padding_idx does.
func specialTokens(o jsonObj, d familyDefaults, cfg *Config) error {
	var err error
	// Ids are metadata to the model (transformers does not check them
	// against the vocabulary either).
	if cfg.BOS, err = o.integer("bos_token_id", d.bos, 0, math.MaxInt32); err != nil {
		return err
	}
	if o.m["bos_token_id"] != nil && !o.has("bos_token_id") {
		cfg.BOS = -1
	}
	switch {
	case o.has("eos_token_id"):
		var ids []json.RawMessage
		raw := bytes.TrimSpace(o.m["eos_token_id"])
		if len(raw) > 0 && raw[0] == '[' {
			if err := json.Unmarshal(raw, &ids); err != nil {
				return fmt.Errorf(`"eos_token_id" is %s, want an id or a list of ids`, raw)
			}
		} else {
			ids = []json.RawMessage{raw}
		}
		if len(ids) > MaxEOS {
			return fmt.Errorf(`"eos_token_id" lists %d ids; gotrain records at most %d`, len(ids), MaxEOS)
		}
		for i, id := range ids {
			v, err := jsonObj{m: map[string]json.RawMessage{"eos_token_id": id}}.integer("eos_token_id", 0, 0, math.MaxInt32)
			if err != nil {
				return err
			}
			cfg.EOS.IDs[i] = v
		}
		cfg.EOS.N = len(ids)
	case o.m["eos_token_id"] == nil && d.eos >= 0:
		cfg.EOS = TokenIDs{N: 1, IDs: [MaxEOS]int{d.eos}}
	}
	pad, err := o.integer("pad_token_id", math.MinInt32, -cfg.V, cfg.V-1)
	if err != nil {
		return err
	}
	switch {
	case pad == math.MinInt32:
		cfg.PadID = -1
	case pad < 0:
		cfg.PadID = cfg.V + pad
	default:
		cfg.PadID = pad
	}
	return nil
}

// hfClass is architectures[0] when config.json lists a causal LM class,
// else the architecture's own.
func hfClass(o jsonObj, arch Arch) (string, error) {
	if !o.has("architectures") {
		return defaultHFClass(arch), nil
	}
	var names []string
	if err := json.Unmarshal(o.m["architectures"], &names); err != nil {
		return "", fmt.Errorf(`"architectures" is %s, want a list of class names`, o.m["architectures"])
	}
	if len(names) == 0 {
		return defaultHFClass(arch), nil
	}
	if !strings.HasSuffix(names[0], "ForCausalLM") {
		return "", fmt.Errorf(`"architectures" is %q, not a causal language model of "model_type" %q (want e.g. %q)`, names, arch, defaultHFClass(arch))
	}
	return names[0], nil
}

// familyConfigDoc is cfg as its model_type's config.json (v4 form, as the
// published checkpoints write it).
func familyConfigDoc(cfg Config) map[string]any {
	doc := map[string]any{
		"architectures":           []string{cfg.HFClass},
		"model_type":              cfg.Arch.String(),
		"vocab_size":              cfg.V,
		"hidden_size":             cfg.C,
		"intermediate_size":       cfg.FF,
		"num_hidden_layers":       cfg.L,
		"num_attention_heads":     cfg.NH,
		"num_key_value_heads":     cfg.KV,
		"hidden_act":              "silu",
		"max_position_embeddings": cfg.MaxT,
		"initializer_range":       cfg.InitStd,
		"rms_norm_eps":            cfg.NormEps,
		"tie_word_embeddings":     cfg.TiedHead,
		"rope_theta":              cfg.Rope.Theta,
		"rope_scaling":            nil,
		"attention_dropout":       0.0,
		"use_cache":               true,
		"torch_dtype":             "float32",
	}
	if cfg.Arch != ArchQwen2 {
		doc["head_dim"] = cfg.HD
	}
	switch cfg.Rope.Scaling {
	case RopeLinear:
		doc["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": cfg.Rope.Factor}
	case RopeLlama3:
		doc["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": cfg.Rope.Factor,
			"low_freq_factor": cfg.Rope.LowFreqFactor, "high_freq_factor": cfg.Rope.HighFreqFactor,
			"original_max_position_embeddings": cfg.Rope.OrigMaxT}
	}
	switch cfg.Arch {
	case ArchLlama:
		doc["attention_bias"], doc["mlp_bias"], doc["pretraining_tp"] = cfg.QKVBias, cfg.MLPBias, 1
	case ArchQwen3:
		doc["attention_bias"] = cfg.QKVBias
		fallthrough
	case ArchQwen2:
		doc["use_sliding_window"], doc["sliding_window"], doc["max_window_layers"] = false, nil, cfg.L
	case ArchMistral:
		doc["sliding_window"] = nil
		if cfg.SlidingWindow > 0 {
			doc["sliding_window"] = cfg.SlidingWindow
		}
	}
	doc["bos_token_id"], doc["eos_token_id"], doc["pad_token_id"] = nil, nil, nil
	if cfg.BOS >= 0 {
		doc["bos_token_id"] = cfg.BOS
	}
	switch eos := cfg.EOS.List(); len(eos) {
	case 0:
	case 1:
		doc["eos_token_id"] = eos[0]
	default:
		doc["eos_token_id"] = eos
	}
	if cfg.PadID >= 0 {
		doc["pad_token_id"] = cfg.PadID
	}
	return doc
}
