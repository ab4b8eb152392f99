package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// Arch is a decoder architecture, named as Hugging Face's model_type.
type Arch uint8

const (
	ArchGPT2    Arch = iota + 1 // "gpt2": LayerNorm, learned positions, GELU, tied head
	ArchLlama                   // "llama": RMSNorm, RoPE, SwiGLU, GQA
	ArchMistral                 // "mistral": Llama's graph, no biases
	ArchQwen2                   // "qwen2": Llama's graph with q/k/v biases
	ArchQwen3                   // "qwen3": Llama's graph with per-head q/k RMSNorm
)

var archNames = [...]string{ArchGPT2: "gpt2", ArchLlama: "llama", ArchMistral: "mistral", ArchQwen2: "qwen2", ArchQwen3: "qwen3"}

func (a Arch) String() string {
	if a >= ArchGPT2 && a <= ArchQwen3 {
		return archNames[a]
	}
	return fmt.Sprintf("Arch(%d)", uint8(a))
}

// parseArch maps a model_type to its Arch.
func parseArch(s string) (Arch, bool) {
	for a := ArchGPT2; a <= ArchQwen3; a++ {
		if archNames[a] == s {
			return a, true
		}
	}
	return 0, false
}

// defaultHFClass is the causal-LM class transformers builds for an arch.
func defaultHFClass(a Arch) string {
	switch a {
	case ArchGPT2:
		return "GPT2LMHeadModel"
	case ArchLlama:
		return "LlamaForCausalLM"
	case ArchMistral:
		return "MistralForCausalLM"
	case ArchQwen2:
		return "Qwen2ForCausalLM"
	case ArchQwen3:
		return "Qwen3ForCausalLM"
	}
	return ""
}

// NormKind is the normalisation of the residual stream.
type NormKind uint8

const (
	LayerNorm NormKind = iota + 1 // (x−mean)·rstd·w + b (GPT-2)
	RMSNorm                       // x·rstd·w, rstd = 1/sqrt(mean(x²)+eps) (Llama family)
)

// Activation is the MLP's nonlinearity.
type Activation uint8

const (
	GELUTanh Activation = iota + 1 // proj(gelu_tanh(fc(x))), fc 4C wide (GPT-2)
	SwiGLU                         // down(silu(gate(x))·up(x)) (Llama family)
)

// Positions is how token positions enter the model.
type Positions uint8

const (
	LearnedPositions Positions = iota + 1 // a wpe table added to the embeddings (GPT-2)
	RotaryPositions                       // RoPE on queries and keys (Llama family)
)

// RopeScaling is a RoPE variant of transformers' modeling_rope_utils.
type RopeScaling uint8

const (
	RopeDefault RopeScaling = iota // inv_freq[j] = 1/θ^(2j/HD)
	RopeLinear                     // inv_freq / factor
	RopeLlama3                     // Llama 3.1's band-wise scaling
)

var ropeNames = [...]string{RopeDefault: "default", RopeLinear: "linear", RopeLlama3: "llama3"}

func (r RopeScaling) String() string {
	if int(r) < len(ropeNames) {
		return ropeNames[r]
	}
	return fmt.Sprintf("RopeScaling(%d)", uint8(r))
}

// Rope holds the rotary embedding's parameters (zero for learned positions).
type Rope struct {
	Theta   float64     // rope_theta, the base
	Scaling RopeScaling // rope_type
	Factor  float64     // linear and llama3: the scaling factor
	// llama3 only: low_freq_factor, high_freq_factor and
	// original_max_position_embeddings.
	LowFreqFactor, HighFreqFactor float64
	OrigMaxT                      int
}

// MaxEOS is how many end-of-sequence ids a Config records (Llama 3.1
// Instruct lists three).
const MaxEOS = 4

// TokenIDs is a short list of special token ids (eos_token_id may be a
// list); a fixed array so that Config stays comparable.
type TokenIDs struct {
	N   int
	IDs [MaxEOS]int
}

// List returns the ids.
func (t TokenIDs) List() []int { return append([]int(nil), t.IDs[:t.N]...) }

// Config describes one member of the decoder family: the shape, and the
// choices that make GPT-2, Llama, Mistral, Qwen2 or Qwen3 out of one graph
// (embeddings → L pre-norm blocks of attention and MLP → final norm → head).
// It is comparable, so two configs are the same model exactly when ==.
// Make GPT-2 configs with GPT2 and the others with ParseHFConfig; Validate
// says whether a Config is one gotrain can run.
type Config struct {
	Arch    Arch
	HFClass string // architectures[0] of config.json, e.g. "LlamaForCausalLM" (export writes it back)

	MaxT int // n_positions / max_position_embeddings: the longest sequence
	V    int // vocab_size
	// Vp is the head's row count: GPT-2 pads V to a multiple of 128 for
	// fast matmuls (rows V..Vp-1 of wte are zero and never reach the
	// loss); the Llama family keeps Vp = V so exported tensors keep their
	// published shapes.
	Vp int
	L  int // transformer blocks
	C  int // hidden size (n_embd / hidden_size)
	NH int // query heads
	KV int // key/value heads: NH without grouped-query attention, 1 for MQA
	HD int // head size: C/NH for GPT-2; may differ for Qwen3 (head_dim)
	FF int // MLP width: 4C for GPT-2, intermediate_size for the family

	Norm    NormKind
	NormEps float64 // 1e-5 for GPT-2 (fixed by the backend's LayerNorm); rms_norm_eps
	Act     Activation
	Pos     Positions
	Rope    Rope // RotaryPositions only

	QKVBias  bool // biases on the q, k and v projections
	OBias    bool // bias on the attention's output projection
	MLPBias  bool // biases on the MLP's projections
	QKNorm   bool // Qwen3: per-head RMSNorm of queries and keys before RoPE
	TiedHead bool // the head is the token embedding (no lm_head tensor)

	InitStd float64 // initializer_range: the std of random init (0.02)
	BOS     int     // bos_token_id, or -1
	EOS     TokenIDs
	// PadID is pad_token_id, or -1. transformers builds the embedding with
	// padding_idx = pad_token_id: that row gets no gradient from the
	// lookup, which gotrain reproduces. GPT-2 has no padding_idx (-1).
	PadID int
	// SlidingWindow is Mistral's sliding_window (0: none). gotrain computes
	// full causal attention, which equals a window at least as long as the
	// sequence; CheckSeqLen refuses longer sequences.
	SlidingWindow int
}

// VocabPad is the multiple GPT-2's vocabulary is padded to (llm.c's choice).
const VocabPad = 128

// PadVocab rounds v up to a multiple of VocabPad (50257 → 50304). A v
// outside (0, MaxDim] is returned as it is, for Validate to name, rather
// than rounded into an overflow.
func PadVocab(v int) int {
	if v < 1 || v > MaxDim {
		return v
	}
	return (v + VocabPad - 1) / VocabPad * VocabPad
}

// Limits of a model's shape. Configs come from untrusted files (config.json,
// llm.c headers, tokenizer.json), so each dimension is bounded before any
// product is formed, and the parameter count is computed with overflow
// checks and bounded too; every count derived from a valid Config (layout
// offsets, NumParams, bytes of a copy of the parameters, FlopsPerToken) then
// fits an int64 with room to spare. Neither limit says a model fits a
// machine: that is the memory gate's job, at start-up.
const (
	// MaxDim bounds every dimension but FF (V, Vp, maxT, L, C, NH, KV, HD):
	// 16,777,216, far above any published model's (vocabularies reach
	// ~256K ids, contexts ~1M).
	MaxDim = 1 << 24
	// MaxParams bounds the parameter count: ~1.1e15, a thousand times the
	// largest published dense models, so that 16 bytes per parameter (fp32
	// master and AdamW moments) still fits an int64.
	MaxParams = 1 << 50
	// MaxFF bounds the MLP width FF, which GPT-2 derives as 4C: FF·C
	// still fits 2^50.
	MaxFF = 4 * MaxDim
)

// InitStd is the standard deviation of GPT-2's weight init (and the Llama
// family's initializer_range default).
const InitStd = 0.02

// gpt2Vocab is the size of the GPT-2 BPE vocabulary.
const gpt2Vocab = 50257

// GPT2 completes a GPT-2 config from its shape fields MaxT, V, Vp, L, NH
// and C (the others of c are ignored): KV = NH, HD = C/NH, FF = 4C,
// LayerNorm 1e-5, tanh GELU, learned positions, every bias, a tied head.
func GPT2(c Config) Config {
	out := Config{
		Arch: ArchGPT2, HFClass: defaultHFClass(ArchGPT2),
		MaxT: c.MaxT, V: c.V, Vp: c.Vp, L: c.L, C: c.C, NH: c.NH, KV: c.NH,
		Norm: LayerNorm, NormEps: 1e-5, Act: GELUTanh, Pos: LearnedPositions,
		QKVBias: true, OBias: true, MLPBias: true, TiedHead: true,
		InitStd: InitStd, BOS: -1, PadID: -1,
	}
	// Out-of-range dimensions stay for Validate to name; only in-range
	// ones are derived from, so nothing here can overflow.
	if c.C >= 1 && c.C <= MaxDim {
		out.FF = 4 * c.C
		if c.NH >= 1 && c.NH <= MaxDim {
			out.HD = c.C / c.NH
		}
	}
	return out
}

// PresetNames lists the built-in presets: GPT-2's smallest first, then the
// Llama family's (presets.go).
func PresetNames() []string {
	names := []string{"gpt2-tiny", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}
	for _, p := range familyPresets() {
		names = append(names, p.name)
	}
	return names
}

// Preset returns a built-in configuration by name: a GPT-2 shape, or a
// published Llama-family model's config.json (presets.go).
func Preset(name string) (Config, bool) {
	if cfg, ok, err := familyPreset(name); ok {
		return cfg, err == nil
	}
	mk := func(maxT, l, nh, c int) Config {
		return GPT2(Config{MaxT: maxT, V: gpt2Vocab, Vp: PadVocab(gpt2Vocab), L: l, NH: nh, C: c})
	}
	switch name {
	case "gpt2-tiny":
		return mk(256, 4, 4, 256), true
	case "gpt2": // 124M
		return mk(1024, 12, 12, 768), true
	case "gpt2-medium": // 350M
		return mk(1024, 24, 16, 1024), true
	case "gpt2-large": // 774M
		return mk(1024, 36, 20, 1280), true
	case "gpt2-xl": // 1558M
		return mk(1024, 48, 25, 1600), true
	}
	return Config{}, false
}

// ByName resolves a preset name, a Hugging Face config.json path, or a
// directory holding a config.json.
func ByName(nameOrPath string) (Config, error) {
	if cfg, ok := Preset(nameOrPath); ok {
		return cfg, nil
	}
	path := nameOrPath
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "config.json")
	} else if err != nil && !strings.HasSuffix(path, ".json") {
		return Config{}, fmt.Errorf("unknown model %q: want one of %s, or a path to a Hugging Face config.json",
			nameOrPath, strings.Join(PresetNames(), ", "))
	}
	return LoadHFConfig(path)
}

// hfKey is the config.json key of a Config field in c's family.
func (c Config) hfKey(field string) string {
	if c.Arch == ArchGPT2 {
		return map[string]string{"MaxT": "n_positions", "V": "vocab_size", "L": "n_layer", "C": "n_embd", "NH": "n_head",
			"KV": "n_head", "HD": "n_embd/n_head", "FF": "n_inner"}[field]
	}
	return map[string]string{"MaxT": "max_position_embeddings", "V": "vocab_size", "L": "num_hidden_layers", "C": "hidden_size",
		"NH": "num_attention_heads", "KV": "num_key_value_heads", "HD": "head_dim", "FF": "intermediate_size"}[field]
}

// key names a Config field in errors: "C (n_embd)".
func (c Config) key(field string) string { return fmt.Sprintf("%s (%s)", field, c.hfKey(field)) }

// Validate checks that c is a model gotrain can run: a known architecture
// with its fixed choices, every dimension in [1, MaxDim], NH a multiple of
// KV, an even head size for RoPE, and at most MaxParams parameters. The
// error names the key and its value.
func (c Config) Validate() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("model config: %w", err)
	}
	return nil
}

// check is Validate without the "model config: " prefix.
func (c Config) check() error {
	if c.Arch < ArchGPT2 || c.Arch > ArchQwen3 {
		return fmt.Errorf("unknown architecture %v; want gpt2, llama, mistral, qwen2 or qwen3", c.Arch)
	}
	for _, d := range []struct {
		field string
		v     int
		max   int
	}{{"MaxT", c.MaxT, MaxDim}, {"V", c.V, MaxDim}, {"L", c.L, MaxDim}, {"NH", c.NH, MaxDim}, {"C", c.C, MaxDim},
		{"KV", c.KV, MaxDim}, {"HD", c.HD, MaxDim}, {"FF", c.FF, MaxFF}} {
		if d.v < 1 || d.v > d.max {
			return fmt.Errorf("%s = %d, want an integer in [1, %d]", c.key(d.field), d.v, d.max)
		}
	}
	if c.Vp < c.V || c.Vp > MaxDim {
		return fmt.Errorf("padded vocab Vp = %d, want between V = %d and %d", c.Vp, c.V, MaxDim)
	}
	if c.NH%c.KV != 0 {
		return fmt.Errorf("%s = %d is not a multiple of %s = %d; each key/value head serves a whole number of query heads",
			c.key("NH"), c.NH, c.key("KV"), c.KV)
	}
	var err error
	if c.Arch == ArchGPT2 {
		err = c.validateGPT2()
	} else {
		err = c.validateFamily()
	}
	if err != nil {
		return err
	}
	if _, err := c.paramCount(); err != nil {
		return err
	}
	return nil
}

// validateGPT2 checks that only GPT-2's shape fields vary: its numerics
// are fixed (and the backend's LayerNorm has eps 1e-5 built in).
func (c Config) validateGPT2() error {
	if c.C%c.NH != 0 {
		return fmt.Errorf("C (n_embd) = %d is not a multiple of NH (n_head) = %d; pick n_head dividing n_embd", c.C, c.NH)
	}
	if want := GPT2(c); c != want {
		return fmt.Errorf("%+v is not GPT-2's graph (want %+v): make GPT-2 configs with model.GPT2", c, want)
	}
	return nil
}

// validateFamily checks a Llama-family config: the choices every member
// shares and what each model_type can express, so an exported config.json
// describes exactly the model that was trained.
func (c Config) validateFamily() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %s", c.Arch, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Vp != c.V:
		return bad("padded vocab Vp = %d, want V = %d: the family's head keeps its published shape", c.Vp, c.V)
	case c.Norm != RMSNorm || c.Act != SwiGLU || c.Pos != RotaryPositions:
		return bad("the family is RMSNorm, SwiGLU and RoPE, got norm %d, activation %d, positions %d", c.Norm, c.Act, c.Pos)
	case c.HD%2 != 0:
		return bad("%s = %d is odd; RoPE rotates pairs of channels", c.key("HD"), c.HD)
	case !(c.NormEps > 0) || math.IsInf(c.NormEps, 0):
		return bad("rms_norm_eps = %g, want a positive number", c.NormEps)
	case !(c.InitStd >= 0) || math.IsInf(c.InitStd, 0):
		return bad("initializer_range = %g, want a non-negative number", c.InitStd)
	case c.SlidingWindow < 0:
		return bad("sliding_window = %d, want a positive window or none", c.SlidingWindow)
	case c.PadID >= c.V:
		return bad("pad_token_id = %d is outside the vocabulary [0, %d)", c.PadID, c.V)
	}
	if err := c.Rope.validate(); err != nil {
		return bad("%v", err)
	}
	// What each model_type's config.json can say.
	switch c.Arch {
	case ArchLlama:
		if c.QKNorm || c.QKVBias != c.OBias {
			return bad("llama has one attention_bias for q, k, v and o and no q/k norm")
		}
	case ArchMistral:
		if c.QKNorm || c.QKVBias || c.OBias || c.MLPBias {
			return bad("mistral has no biases and no q/k norm")
		}
	case ArchQwen2:
		if c.QKNorm || !c.QKVBias || c.OBias || c.MLPBias {
			return bad("qwen2 has q/k/v biases, no o_proj or MLP bias and no q/k norm")
		}
		if c.NH*c.HD != c.C {
			return bad("qwen2's head size is hidden_size/num_attention_heads = %d/%d, got head size %d", c.C, c.NH, c.HD)
		}
	case ArchQwen3:
		if !c.QKNorm || c.QKVBias != c.OBias || c.MLPBias {
			return bad("qwen3 has q/k norms, one attention_bias for q, k, v and o, and no MLP bias")
		}
	}
	if c.Arch != ArchMistral && c.SlidingWindow != 0 {
		return bad("sliding_window = %d: only mistral's window is recorded", c.SlidingWindow)
	}
	return nil
}

func (r Rope) validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if !(r.Theta > 0) || !finite(r.Theta) {
		return fmt.Errorf("rope_theta = %g, want a positive number", r.Theta)
	}
	switch r.Scaling {
	case RopeDefault:
		if r.Factor != 0 || r.LowFreqFactor != 0 || r.HighFreqFactor != 0 || r.OrigMaxT != 0 {
			return fmt.Errorf("default RoPE takes no scaling parameters")
		}
	case RopeLinear:
		if !(r.Factor > 0) || !finite(r.Factor) || r.LowFreqFactor != 0 || r.HighFreqFactor != 0 || r.OrigMaxT != 0 {
			return fmt.Errorf("rope_scaling.factor = %g for linear RoPE, want a positive number (and no other key)", r.Factor)
		}
	case RopeLlama3:
		switch {
		case !(r.Factor > 0) || !finite(r.Factor):
			return fmt.Errorf("rope_scaling.factor = %g, want a positive number", r.Factor)
		case !(r.LowFreqFactor > 0) || !finite(r.LowFreqFactor) || !(r.HighFreqFactor > r.LowFreqFactor) || !finite(r.HighFreqFactor):
			return fmt.Errorf("rope_scaling.low_freq_factor = %g and high_freq_factor = %g, want 0 < low < high", r.LowFreqFactor, r.HighFreqFactor)
		case r.OrigMaxT < 1 || r.OrigMaxT > MaxDim:
			return fmt.Errorf("rope_scaling.original_max_position_embeddings = %d, want an integer in [1, %d]", r.OrigMaxT, MaxDim)
		}
	default:
		return fmt.Errorf("unknown RoPE scaling %v", r.Scaling)
	}
	return nil
}

// CheckSeqLen says whether the model trains at sequence length T: 1 ≤ T ≤
// MaxT, and for Mistral T within the sliding window, where full causal
// attention (what gotrain computes) is what transformers computes too.
func (c Config) CheckSeqLen(T int) error {
	if T < 1 || T > c.MaxT {
		return fmt.Errorf("sequence length %d: want 1 ≤ T ≤ %d (the model's %s)", T, c.MaxT, c.hfKey("MaxT"))
	}
	if c.SlidingWindow > 0 && T > c.SlidingWindow {
		return fmt.Errorf("sequence length %d is longer than the model's sliding_window %d: gotrain computes full causal attention, "+
			"which matches a sliding window only as long as the sequence fits in it; train with a sequence length of at most %d",
			T, c.SlidingWindow, c.SlidingWindow)
	}
	return nil
}

// QKVWidth is the fused q/k/v projection's width: (NH + 2·KV)·HD.
func (c Config) QKVWidth() int { return (c.NH + 2*c.KV) * c.HD }

// AttnWidth is the attention output's width, o_proj's input: NH·HD.
func (c Config) AttnWidth() int { return c.NH * c.HD }

// upWidth is the MLP's first projection's width: 4C for GPT-2 (c_fc), 2·FF
// for SwiGLU (gate_proj and up_proj fused).
func (c Config) upWidth() int {
	if c.Act == SwiGLU {
		return 2 * c.FF
	}
	return c.FF
}

// HeadSize is the head size HD.
func (c Config) HeadSize() int { return c.HD }

// paramCount is NumParams computed with overflow checks on a config whose
// dimensions are in [1, MaxDim]: the count is first estimated in float64,
// and only a count below the limit (every term then fits an int64 with
// room to spare) is computed exactly.
func (c Config) paramCount() (int64, error) {
	var est float64
	for _, s := range c.specs() {
		est += float64(s.reps) * s.elemsF()
	}
	if est > MaxParams {
		return 0, fmt.Errorf("%s = %d and %s = %d give %s parameters, more than gotrain's limit of %d; pick a smaller model",
			c.hfKey("L"), c.L, c.hfKey("C"), c.C, approxCount(est), int64(MaxParams))
	}
	var n int64
	for _, s := range c.specs() {
		n += int64(s.reps) * int64(s.elems())
	}
	if n > MaxParams {
		return 0, fmt.Errorf("%d parameters, more than gotrain's limit of %d; pick a smaller model", n, int64(MaxParams))
	}
	return n, nil
}

// approxCount writes a count too large for exact arithmetic, e.g. "5.2e+15".
func approxCount(x float64) string { return fmt.Sprintf("%.2g", x) }

// NumParams counts every parameter of the flat layout, including GPT-2's
// wpe and padded wte rows (llm.c's count: 124,475,904 for gpt2). c must be
// valid (Validate), which keeps the count below MaxParams; an invalid c
// gives -1.
func (c Config) NumParams() int {
	if c.Validate() != nil {
		return -1
	}
	n, _ := c.paramCount()
	return int(n)
}

// FlopsPerToken is the training cost of one token at sequence length T,
// counted from what the model multiplies: 6·W + 6·L·T·NH·HD, where W is
// every weight used in a matmul per token (the blocks' q/k/v, o, and MLP
// matrices, and the head's Vp×C counted once, tied or not) and the second
// term is attention's scores and weighted sum over the causal half of the
// T×T matrix (forward 2·T·HD per head, backward twice that). Embedding
// lookups, norms and biases cost no matmul and are not counted. For GPT-2
// this is llm.c's 6·N + 6·L·C·T without wpe, the biases and the norms
// (gpt2 124M at T=1024: 7.98e8 where llm.c says 8.035e8); for the family
// it follows GQA (k and v are KV·HD wide), SwiGLU (three FF×C matrices)
// and an untied head.
func (c Config) FlopsPerToken(T int) float64 {
	C, HD := float64(c.C), float64(c.HD)
	attn := float64(c.QKVWidth())*C + float64(c.AttnWidth())*C
	mlp := 2 * float64(c.FF) * C // GPT-2: c_fc and c_proj
	if c.Act == SwiGLU {
		mlp = 3 * float64(c.FF) * C // gate, up, down
	}
	w := float64(c.L)*(attn+mlp) + float64(c.Vp)*C
	return 6*w + 6*float64(c.L)*float64(T)*float64(c.NH)*HD
}

// Summary names the architecture and the block shape: "GPT-2 L12 NH12
// C768", "qwen3 L28 NH16 KV8 HD128 C1024 FF3072".
func (c Config) Summary() string {
	if c.Arch == ArchGPT2 {
		return fmt.Sprintf("GPT-2 L%d NH%d C%d", c.L, c.NH, c.C)
	}
	return fmt.Sprintf("%s L%d NH%d KV%d HD%d C%d FF%d", c.Arch, c.L, c.NH, c.KV, c.HD, c.C, c.FF)
}

func (c Config) String() string {
	s := fmt.Sprintf("%s maxT%d V%d", c.Summary(), c.MaxT, c.V)
	switch {
	case c.Arch == ArchGPT2:
		s += fmt.Sprintf(" (Vp%d)", c.Vp)
	case c.TiedHead:
		s += " tied"
	}
	if c.Validate() != nil {
		return s + " (invalid)"
	}
	return fmt.Sprintf("%s, %d params", s, c.NumParams())
}

// Diff lists the fields in which c and o differ, as "Field: c's → o's",
// for errors that say why two configs are not the same model.
func (c Config) Diff(o Config) []string {
	var out []string
	a, b := reflect.ValueOf(c), reflect.ValueOf(o)
	for i := range a.NumField() {
		if x, y := a.Field(i).Interface(), b.Field(i).Interface(); x != y {
			out = append(out, fmt.Sprintf("%s: %v → %v", a.Type().Field(i).Name, x, y))
		}
	}
	return out
}
