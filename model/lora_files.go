package model

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/internal/atomicfile"
	"github.com/gotrain/gotrain/internal/regularfile"
)

// PEFT's adapter directory: adapter_config.json and
// adapter_model.safetensors, with tensors named
// base_model.model.<module path>.lora_A.weight (r, in) and
// ….lora_B.weight (out, r), as PeftModel.save_pretrained writes them and
// PeftModel.from_pretrained, vLLM and merge_and_unload read them.

// Adapter file names in a PEFT adapter directory.
const (
	AdapterConfigFile  = "adapter_config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
)

// adapterConfigJSON is the part of adapter_config.json gotrain reads; the
// rest is kept as raw JSON to refuse what it does not support by name.
type adapterConfigJSON struct {
	PeftType      string          `json:"peft_type"`
	R             int             `json:"r"`
	Alpha         *float64        `json:"lora_alpha"`
	Target        json.RawMessage `json:"target_modules"`
	Dropout       float64         `json:"lora_dropout"`
	RSLoRA        bool            `json:"use_rslora"`
	Bias          string          `json:"bias"`
	ModulesToSave []string        `json:"modules_to_save"`
	UseDoRA       bool            `json:"use_dora"`
	RankPattern   map[string]any  `json:"rank_pattern"`
	AlphaPattern  map[string]any  `json:"alpha_pattern"`
	LayersToXform json.RawMessage `json:"layers_to_transform"`
}

// ParseAdapterConfig reads PEFT's adapter_config.json. It refuses, naming
// the key, what gotrain does not support: another peft_type, bias other
// than "none", modules_to_save, use_dora, rank_pattern/alpha_pattern,
// layers_to_transform and a target_modules regex. lora_dropout is a
// probability in [0, 1): training applies it, sampling and merging ignore
// it, as PEFT's eval mode does.
func ParseAdapterConfig(data []byte) (LoRA, error) {
	var c adapterConfigJSON
	if err := json.Unmarshal(data, &c); err != nil {
		return LoRA{}, fmt.Errorf("adapter_config.json: %w", err)
	}
	refuse := func(key, why string) (LoRA, error) {
		return LoRA{}, fmt.Errorf("adapter_config.json: %s %s", key, why)
	}
	switch {
	case c.PeftType != "" && c.PeftType != "LORA":
		return refuse("peft_type", fmt.Sprintf("%q: only LORA adapters are supported", c.PeftType))
	case c.R < 1:
		return refuse("r", fmt.Sprintf("%d: want a rank of at least 1", c.R))
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return refuse("lora_dropout", fmt.Sprintf("%g: want a probability in [0, 1)", c.Dropout))
	case c.Bias != "" && c.Bias != "none":
		return refuse("bias", fmt.Sprintf("%q is not supported: only \"none\" (the base's biases stay frozen)", c.Bias))
	case len(c.ModulesToSave) > 0:
		return refuse("modules_to_save", fmt.Sprintf("%v is not supported yet: train the adapters only (remove the key)", c.ModulesToSave))
	case c.UseDoRA:
		return refuse("use_dora", "is not supported: DoRA is another method")
	case len(c.RankPattern) > 0 || len(c.AlphaPattern) > 0:
		return refuse("rank_pattern/alpha_pattern", "are not supported: every adapter takes r and lora_alpha")
	case len(c.LayersToXform) > 0 && string(c.LayersToXform) != "null":
		return refuse("layers_to_transform", "is not supported: adapters go on every block")
	}
	l := LoRA{R: c.R, Alpha: DefaultLoRAAlpha, RSLoRA: c.RSLoRA, Dropout: c.Dropout}
	if c.Alpha != nil {
		l.Alpha = *c.Alpha
	}
	var one string
	switch {
	case len(c.Target) == 0 || string(c.Target) == "null":
		return refuse("target_modules", "is missing: list the modules to adapt (e.g. [\"q_proj\", \"v_proj\"]) or \"all-linear\"")
	case json.Unmarshal(c.Target, &l.Target) == nil:
	case json.Unmarshal(c.Target, &one) == nil && one == "all-linear":
		l.Target = []string{one}
	default:
		return refuse("target_modules", fmt.Sprintf("%s is not supported: a regex string is not; give a list of module names or \"all-linear\"", c.Target))
	}
	if len(l.Target) == 0 {
		return refuse("target_modules", "is empty: list the modules to adapt (e.g. [\"q_proj\", \"v_proj\"]) or \"all-linear\"")
	}
	return l, nil
}

// maxAdapterConfigBytes bounds an adapter_config.json: PEFT writes a few
// kilobytes, a long target_modules list included.
const maxAdapterConfigBytes = 4 << 20

// LoadAdapterConfig reads dir/adapter_config.json.
func LoadAdapterConfig(dir string) (LoRA, error) {
	data, err := regularfile.Read("LoRA adapter config", filepath.Join(dir, AdapterConfigFile), maxAdapterConfigBytes)
	if err != nil {
		return LoRA{}, err
	}
	l, err := ParseAdapterConfig(data)
	if err != nil {
		return LoRA{}, fmt.Errorf("LoRA adapter %s: %w", dir, err)
	}
	return l, nil
}

// LoadAdapter reads dir/adapter_model.safetensors into lay's flat layout.
// Every tensor lay has must be there with PEFT's shape, and the file may
// hold nothing else (an adapter for other modules is refused by name).
func LoadAdapter(dir string, lay *AdapterLayout) ([]float32, error) {
	path := filepath.Join(dir, AdapterWeightsFile)
	f, err := OpenSafetensors(path)
	if err != nil {
		return nil, fmt.Errorf("LoRA adapter: %w", err)
	}
	defer f.Close()
	out := make([]float32, lay.NumParams())
	want := map[string]bool{}
	for _, t := range lay.tensors {
		want[t.Name] = true
		h, ok := f.Header(t.Name)
		if !ok {
			return nil, fmt.Errorf("LoRA adapter %s has no tensor %s: the adapter was trained for other target_modules or another model", path, t.Name)
		}
		if !slices.Equal(h.Shape, t.Shape) {
			return nil, fmt.Errorf("LoRA adapter %s: %s has shape %v, the model needs %v (r = %d)", path, t.Name, h.Shape, t.Shape, lay.lora.R)
		}
		if err := f.ReadFloat32At(h, 0, out[t.Offset:t.Offset+t.Len]); err != nil {
			return nil, fmt.Errorf("LoRA adapter %s: %s: %w", path, t.Name, err)
		}
	}
	for _, h := range f.Tensors() {
		if !want[h.Name] {
			return nil, fmt.Errorf("LoRA adapter %s holds %s, which the model's adapters do not have (modules_to_save and other tensors are not supported)", path, h.Name)
		}
	}
	return out, nil
}

// SaveAdapter writes a PEFT adapter directory: adapter_model.safetensors
// (values in lay's flat layout, stored as dt) and adapter_config.json
// naming base as base_model_name_or_path. Each file is written to a
// temporary name and renamed.
func SaveAdapter(dir string, lay *AdapterLayout, values []float32, dt backend.DType, base string) error {
	if len(values) != lay.NumParams() {
		return fmt.Errorf("save LoRA adapter: %d values for %d adapter parameters", len(values), lay.NumParams())
	}
	if err := atomicfile.MkdirAll(dir); err != nil {
		return fmt.Errorf("save LoRA adapter: %w", err)
	}
	var ts []NamedTensor
	for _, t := range lay.tensors {
		ts = append(ts, NamedTensor{Name: t.Name, DType: dt, Shape: t.Shape, Data: EncodeFloat32(values[t.Offset:t.Offset+t.Len], dt)})
	}
	if err := SaveSafetensors(filepath.Join(dir, AdapterWeightsFile), ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save LoRA adapter: %w", err)
	}
	l := lay.lora
	cfg := map[string]any{
		"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base,
		"r": l.R, "lora_alpha": l.Alpha, "lora_dropout": l.Dropout, "use_rslora": l.RSLoRA,
		"target_modules": lay.Modules(), "bias": "none", "modules_to_save": nil,
		"fan_in_fan_out": lay.cfg.Arch == ArchGPT2, "init_lora_weights": true, "inference_mode": true,
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("save LoRA adapter: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, AdapterConfigFile), append(data, '\n')); err != nil {
		return fmt.Errorf("save LoRA adapter: %w", err)
	}
	return nil
}

// MergeAdapter adds s·B·A of every adapter to its base weight in params
// (the base's flat layout, as Layout describes it), as PEFT's
// merge_and_unload does, in float64 per element. The fused projections'
// rows are the modules' own (q_proj's rows of the q/k/v matrix, …).
func MergeAdapter(lay *Layout, alay *AdapterLayout, params, adapters []float32) error {
	if lay.cfg != alay.cfg {
		return fmt.Errorf("merge LoRA adapter: it was laid out for another model shape")
	}
	if len(params) != lay.NumParams() || len(adapters) != alay.NumParams() {
		return fmt.Errorf("merge LoRA adapter: %d base values for %d parameters, %d adapter values for %d", len(params), lay.NumParams(), len(adapters), alay.NumParams())
	}
	r, s := alay.lora.R, alay.lora.Scale()
	for b := range lay.cfg.L {
		for k := range numSlots {
			for _, mod := range alay.slots[k].mods {
				w, ok := lay.Lookup(lay.cfg.blockPrefix(b) + mod.path + ".weight")
				if !ok {
					return fmt.Errorf("merge LoRA adapter: the base has no %s", mod.path)
				}
				A := adapters[b*alay.per+mod.aOff:]
				Bm := adapters[b*alay.per+mod.bOff:]
				W := params[w.Offset : w.Offset+w.Len]
				for o := range mod.out {
					for i := range mod.in {
						var d float64
						for j := range r {
							d += float64(Bm[o*r+j]) * float64(A[j*mod.in+i])
						}
						W[o*mod.in+i] = float32(float64(W[o*mod.in+i]) + s*d)
					}
				}
			}
		}
	}
	return nil
}

// ParseAdapterConfigFile reads an adapter_config.json at path.
func ParseAdapterConfigFile(path string) (LoRA, error) {
	data, err := regularfile.Read("LoRA adapter config", path, maxAdapterConfigBytes)
	if err != nil {
		return LoRA{}, err
	}
	l, err := ParseAdapterConfig(data)
	if err != nil {
		return LoRA{}, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// AdapterBaseModel is dir/adapter_config.json's base_model_name_or_path:
// the model the adapter was trained on, as the writer recorded it ("" when
// it recorded none).
func AdapterBaseModel(dir string) (string, error) {
	path := filepath.Join(dir, AdapterConfigFile)
	raw, err := regularfile.Read("LoRA adapter config", path, maxAdapterConfigBytes)
	if err != nil {
		return "", err
	}
	var doc struct {
		Base *string `json:"base_model_name_or_path"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", fmt.Errorf("LoRA adapter config %s: %w", path, err)
	}
	if doc.Base == nil {
		return "", nil
	}
	return *doc.Base, nil
}
