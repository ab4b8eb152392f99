package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Config is the shape of a GPT-2 model.
type Config struct {
	MaxT int // n_positions: rows of wpe, the longest sequence, e.g. 1024
	V    int // vocab_size, e.g. 50257
	Vp   int // V padded for fast matmuls, e.g. 50304; rows V..Vp-1 of wte are zero
	L    int // number of transformer blocks
	NH   int // attention heads; C % NH == 0
	C    int // channels (n_embd)
}

// VocabPad is the multiple the vocabulary is padded to (llm.c's choice).
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
	// MaxDim bounds V, Vp, maxT, L, NH and C: 16,777,216, far above any
	// published model's (vocabularies reach ~256K ids, contexts ~1M).
	MaxDim = 1 << 24
	// MaxParams bounds the parameter count: ~1.1e15, a thousand times the
	// largest published dense models, so that 16 bytes per parameter (fp32
	// master and AdamW moments) still fits an int64.
	MaxParams = 1 << 50
)

// gpt2Vocab is the size of the GPT-2 BPE vocabulary.
const gpt2Vocab = 50257

// PresetNames lists the built-in presets, smallest first.
func PresetNames() []string {
	return []string{"gpt2-tiny", "gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl"}
}

// Preset returns a built-in configuration by name.
func Preset(name string) (Config, bool) {
	mk := func(maxT, l, nh, c int) Config {
		return Config{MaxT: maxT, V: gpt2Vocab, Vp: PadVocab(gpt2Vocab), L: l, NH: nh, C: c}
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

// Validate checks that the shape is one the model can run: every dimension
// in [1, MaxDim], C a multiple of NH, Vp ≥ V, and at most MaxParams
// parameters. The error names the key and its value.
func (c Config) Validate() error {
	for _, d := range []struct {
		key string
		v   int
	}{{"MaxT (n_positions)", c.MaxT}, {"V (vocab_size)", c.V}, {"L (n_layer)", c.L}, {"NH (n_head)", c.NH}, {"C (n_embd)", c.C}} {
		if d.v < 1 || d.v > MaxDim {
			return fmt.Errorf("model config: %s = %d, want an integer in [1, %d]", d.key, d.v, MaxDim)
		}
	}
	switch {
	case c.Vp < c.V || c.Vp > MaxDim:
		return fmt.Errorf("model config: padded vocab Vp = %d, want between V = %d and %d", c.Vp, c.V, MaxDim)
	case c.C%c.NH != 0:
		return fmt.Errorf("model config: C (n_embd) = %d is not a multiple of NH (n_head) = %d; pick n_head dividing n_embd", c.C, c.NH)
	}
	if _, err := c.paramCount(); err != nil {
		return fmt.Errorf("model config: %w", err)
	}
	return nil
}

// paramCount is NumParams computed with overflow checks on a config whose
// dimensions are in [1, MaxDim]: each product of two dimensions fits an
// int64, only the layer sum can overflow.
func (c Config) paramCount() (int64, error) {
	C := int64(c.C)
	perLayer := 12*C*C + 13*C // qkv 3C², attproj C², fc 4C², fcproj 4C²; biases and LN 13C
	layers, ok := mulInt64(int64(c.L), perLayer)
	n := int64(c.Vp)*C + int64(c.MaxT)*C + 2*C
	if !ok || layers > MaxParams || n+layers > MaxParams {
		return 0, fmt.Errorf("n_layer = %d and n_embd = %d give %s parameters, more than gotrain's limit of %d; pick a smaller model",
			c.L, c.C, approxCount(float64(c.L)*float64(perLayer)+float64(n)), int64(MaxParams))
	}
	return n + layers, nil
}

// mulInt64 multiplies non-negative a and b; ok is false on overflow.
func mulInt64(a, b int64) (int64, bool) {
	if a != 0 && b > math.MaxInt64/a {
		return 0, false
	}
	return a * b, true
}

// approxCount writes a count too large for exact arithmetic, e.g. "5.2e+15".
func approxCount(x float64) string { return fmt.Sprintf("%.2g", x) }

// HeadSize is C/NH.
func (c Config) HeadSize() int { return c.C / c.NH }

// NumParams counts every parameter of the flat layout, including wpe and the
// padded rows of wte (llm.c's count: 124,475,904 for gpt2). c must be valid
// (Validate), which keeps the count below MaxParams; an invalid c gives -1.
func (c Config) NumParams() int {
	if c.Validate() != nil {
		return -1
	}
	n, _ := c.paramCount()
	return int(n)
}

// FlopsPerToken is llm.c's training cost of one token at sequence length T:
// 6·N + 6·L·C·T, where N = NumParams (wpe and the padded wte included) and the
// attention term counts the causal half of the T×T scores. nanoGPT's formula
// differs (non-embedding N, 12·L·C·T), so its MFU reads higher.
func (c Config) FlopsPerToken(T int) float64 {
	return 6*float64(c.NumParams()) + 6*float64(c.L)*float64(c.C)*float64(T)
}

func (c Config) String() string {
	s := fmt.Sprintf("GPT-2 L%d NH%d C%d maxT%d V%d (Vp%d)", c.L, c.NH, c.C, c.MaxT, c.V, c.Vp)
	if c.Validate() != nil {
		return s + " (invalid)"
	}
	return fmt.Sprintf("%s, %d params", s, c.NumParams())
}
