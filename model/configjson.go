package model

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// configJSON is a Config as gotrain records it (a checkpoint's meta.json,
// an estimate's report): every field, under Hugging Face's key names where
// one exists. GPT-2 keeps the six keys its record always had (plus
// "architecture"); the rest of a GPT-2 Config is fixed. A record without
// "architecture" is GPT-2's, as older checkpoints wrote it.
type configJSON struct {
	Arch    string `json:"architecture,omitempty"`
	HFClass string `json:"hf_class,omitempty"`

	// GPT-2.
	NPositions  int `json:"n_positions,omitempty"`
	PaddedVocab int `json:"padded_vocab_size,omitempty"`
	NLayer      int `json:"n_layer,omitempty"`
	NHead       int `json:"n_head,omitempty"`
	NEmbd       int `json:"n_embd,omitempty"`

	VocabSize int `json:"vocab_size"`

	// The Llama family.
	MaxPos     int      `json:"max_position_embeddings,omitempty"`
	Layers     int      `json:"num_hidden_layers,omitempty"`
	Hidden     int      `json:"hidden_size,omitempty"`
	Heads      int      `json:"num_attention_heads,omitempty"`
	KVHeads    int      `json:"num_key_value_heads,omitempty"`
	HeadDim    int      `json:"head_dim,omitempty"`
	Inter      int      `json:"intermediate_size,omitempty"`
	Eps        float64  `json:"rms_norm_eps,omitempty"`
	Rope       *ropeRec `json:"rope,omitempty"`
	QKVBias    bool     `json:"qkv_bias,omitempty"`
	OBias      bool     `json:"o_bias,omitempty"`
	MLPBias    bool     `json:"mlp_bias,omitempty"`
	QKNorm     bool     `json:"qk_norm,omitempty"`
	Tied       bool     `json:"tie_word_embeddings,omitempty"`
	InitStd    float64  `json:"initializer_range,omitempty"`
	BOS        *int     `json:"bos_token_id,omitempty"`
	EOS        []int    `json:"eos_token_id,omitempty"`
	Pad        *int     `json:"pad_token_id,omitempty"`
	SlidingWin int      `json:"sliding_window,omitempty"`
}

type ropeRec struct {
	Theta    float64 `json:"rope_theta"`
	Type     string  `json:"rope_type"`
	Factor   float64 `json:"factor,omitempty"`
	Low      float64 `json:"low_freq_factor,omitempty"`
	High     float64 `json:"high_freq_factor,omitempty"`
	OrigMaxT int     `json:"original_max_position_embeddings,omitempty"`
}

// MarshalJSON records c (configJSON).
func (c Config) MarshalJSON() ([]byte, error) {
	if c.Arch == ArchGPT2 {
		return json.Marshal(configJSON{Arch: "gpt2", NPositions: c.MaxT, VocabSize: c.V, PaddedVocab: c.Vp, NLayer: c.L, NHead: c.NH, NEmbd: c.C})
	}
	j := configJSON{
		Arch: c.Arch.String(), HFClass: c.HFClass,
		VocabSize: c.V, MaxPos: c.MaxT, Layers: c.L, Hidden: c.C, Heads: c.NH, KVHeads: c.KV, HeadDim: c.HD, Inter: c.FF,
		Eps: c.NormEps, QKVBias: c.QKVBias, OBias: c.OBias, MLPBias: c.MLPBias, QKNorm: c.QKNorm, Tied: c.TiedHead,
		InitStd: c.InitStd, EOS: c.EOS.List(), SlidingWin: c.SlidingWindow,
		Rope: &ropeRec{Theta: c.Rope.Theta, Type: c.Rope.Scaling.String(), Factor: c.Rope.Factor,
			Low: c.Rope.LowFreqFactor, High: c.Rope.HighFreqFactor, OrigMaxT: c.Rope.OrigMaxT},
	}
	if c.BOS >= 0 {
		j.BOS = &c.BOS
	}
	if c.PadID >= 0 {
		j.Pad = &c.PadID
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a record MarshalJSON wrote and validates it: the
// record comes from a file (a checkpoint's meta.json), so a Config read
// from one is as trustworthy as one parsed from a config.json.
func (c *Config) UnmarshalJSON(b []byte) error {
	var j configJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("model config record: %w", err)
	}
	var cfg Config
	switch j.Arch {
	case "", "gpt2":
		cfg = GPT2(Config{MaxT: j.NPositions, V: j.VocabSize, Vp: j.PaddedVocab, L: j.NLayer, NH: j.NHead, C: j.NEmbd})
	default:
		arch, ok := parseArch(j.Arch)
		if !ok {
			return fmt.Errorf("model config record: unknown architecture %q", j.Arch)
		}
		cfg = Config{
			Arch: arch, HFClass: j.HFClass, MaxT: j.MaxPos, V: j.VocabSize, Vp: j.VocabSize, L: j.Layers, C: j.Hidden,
			NH: j.Heads, KV: j.KVHeads, HD: j.HeadDim, FF: j.Inter,
			Norm: RMSNorm, NormEps: j.Eps, Act: SwiGLU, Pos: RotaryPositions,
			QKVBias: j.QKVBias, OBias: j.OBias, MLPBias: j.MLPBias, QKNorm: j.QKNorm, TiedHead: j.Tied,
			InitStd: j.InitStd, BOS: -1, PadID: -1, SlidingWindow: j.SlidingWin,
		}
		if j.Rope != nil {
			cfg.Rope = Rope{Theta: j.Rope.Theta, Factor: j.Rope.Factor, LowFreqFactor: j.Rope.Low,
				HighFreqFactor: j.Rope.High, OrigMaxT: j.Rope.OrigMaxT}
			found := false
			for s := RopeDefault; s <= RopeLlama3; s++ {
				if s.String() == j.Rope.Type {
					cfg.Rope.Scaling, found = s, true
				}
			}
			if !found {
				return fmt.Errorf("model config record: unknown RoPE type %q", j.Rope.Type)
			}
		}
		if j.BOS != nil {
			cfg.BOS = *j.BOS
		}
		if j.Pad != nil {
			cfg.PadID = *j.Pad
		}
		if len(j.EOS) > MaxEOS {
			return fmt.Errorf("model config record: %d eos ids, at most %d", len(j.EOS), MaxEOS)
		}
		cfg.EOS.N = copy(cfg.EOS.IDs[:], j.EOS)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("model config record: %w", err)
	}
	*c = cfg
	return nil
}

// Describe names every field of c in one line, with config.json's keys:
// two configs describe alike exactly when they are the same model. GPT-2's
// line is the one gotrain's run records always had.
func (c Config) Describe() string {
	if c.Arch == ArchGPT2 {
		return fmt.Sprintf("n_layer %d, n_head %d, n_embd %d, n_positions %d, vocab_size %d (padded %d)",
			c.L, c.NH, c.C, c.MaxT, c.V, c.Vp)
	}
	s := fmt.Sprintf("%s (%s): num_hidden_layers %d, hidden_size %d, num_attention_heads %d, num_key_value_heads %d, head_dim %d, "+
		"intermediate_size %d, max_position_embeddings %d, vocab_size %d, rms_norm_eps %g, rope %s theta %g",
		c.Arch, c.HFClass, c.L, c.C, c.NH, c.KV, c.HD, c.FF, c.MaxT, c.V, c.NormEps, c.Rope.Scaling, c.Rope.Theta)
	if c.Rope.Scaling != RopeDefault {
		s += fmt.Sprintf(" factor %g", c.Rope.Factor)
	}
	if c.Rope.Scaling == RopeLlama3 {
		s += fmt.Sprintf(" low %g high %g original %d", c.Rope.LowFreqFactor, c.Rope.HighFreqFactor, c.Rope.OrigMaxT)
	}
	s += fmt.Sprintf(", qkv_bias %v, o_bias %v, mlp_bias %v, qk_norm %v, tie_word_embeddings %v, initializer_range %g, bos %d, eos %v, pad %d",
		c.QKVBias, c.OBias, c.MLPBias, c.QKNorm, c.TiedHead, c.InitStd, c.BOS, c.EOS.List(), c.PadID)
	if c.SlidingWindow > 0 {
		s += fmt.Sprintf(", sliding_window %d", c.SlidingWindow)
	}
	return s
}
