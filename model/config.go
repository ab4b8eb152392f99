package model

import (
	"fmt"
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

// PadVocab rounds v up to a multiple of VocabPad (50257 → 50304).
func PadVocab(v int) int { return (v + VocabPad - 1) / VocabPad * VocabPad }

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

// Validate checks that the shape is one the model can run.
func (c Config) Validate() error {
	switch {
	case c.MaxT < 1:
		return fmt.Errorf("model config: MaxT (n_positions) = %d, want ≥ 1", c.MaxT)
	case c.V < 1:
		return fmt.Errorf("model config: V (vocab_size) = %d, want ≥ 1", c.V)
	case c.Vp < c.V:
		return fmt.Errorf("model config: padded vocab Vp = %d is smaller than V = %d", c.Vp, c.V)
	case c.L < 1:
		return fmt.Errorf("model config: L (n_layer) = %d, want ≥ 1", c.L)
	case c.NH < 1:
		return fmt.Errorf("model config: NH (n_head) = %d, want ≥ 1", c.NH)
	case c.C < 1:
		return fmt.Errorf("model config: C (n_embd) = %d, want ≥ 1", c.C)
	case c.C%c.NH != 0:
		return fmt.Errorf("model config: C (n_embd) = %d is not a multiple of NH (n_head) = %d; pick n_head dividing n_embd", c.C, c.NH)
	}
	return nil
}

// HeadSize is C/NH.
func (c Config) HeadSize() int { return c.C / c.NH }

// NumParams counts every parameter of the flat layout, including wpe and the
// padded rows of wte (llm.c's count: 124,475,904 for gpt2).
func (c Config) NumParams() int {
	C := c.C
	perLayer := 12*C*C + 13*C // qkv 3C², attproj C², fc 4C², fcproj 4C²; biases and LN 13C
	return c.Vp*C + c.MaxT*C + c.L*perLayer + 2*C
}

// FlopsPerToken is llm.c's training cost of one token at sequence length T:
// 6·N + 6·L·C·T, where N = NumParams (wpe and the padded wte included) and the
// attention term counts the causal half of the T×T scores. nanoGPT's formula
// differs (non-embedding N, 12·L·C·T), so its MFU reads higher.
func (c Config) FlopsPerToken(T int) float64 {
	return 6*float64(c.NumParams()) + 6*float64(c.L)*float64(c.C)*float64(T)
}

func (c Config) String() string {
	return fmt.Sprintf("GPT-2 L%d NH%d C%d maxT%d V%d (Vp%d), %d params", c.L, c.NH, c.C, c.MaxT, c.V, c.Vp, c.NumParams())
}
