package model

import "testing"

// FuzzParseAdapterConfig: any bytes give a LoRA or an error, never a
// panic; an accepted configuration has a rank, a finite scale, targets,
// and lays out on a Llama-family shape or is refused with an error.
func FuzzParseAdapterConfig(f *testing.F) {
	f.Add([]byte(`{"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], "lora_dropout": 0.0, "bias": "none"}`))
	f.Add([]byte(`{"r": 4, "target_modules": "all-linear", "use_rslora": true}`))
	f.Add([]byte(`{"r": 8, "target_modules": ".*proj", "modules_to_save": ["lm_head"]}`))
	f.Add([]byte(`{"peft_type": "LORA", "r": 1, "lora_alpha": -3, "target_modules": ["c_attn"]}`))
	cfg, ok := Preset("qwen3-0.6b") // layouts only: nothing is allocated
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseAdapterConfig(data)
		if err != nil {
			return
		}
		if l.R < 1 || len(l.Target) == 0 {
			t.Fatalf("accepted %q as %+v", data, l)
		}
		if ok && l.R <= 64 {
			if lay, err := NewAdapterLayout(cfg, l); err == nil && lay.NumParams() <= 0 {
				t.Fatalf("%+v lays out no adapter parameters", l)
			}
		}
	})
}
