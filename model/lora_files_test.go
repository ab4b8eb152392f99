package model

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// TestSaveAdapterKeepsPEFTNamesAndShapes writes each fixture's adapter
// back out and checks that the file holds exactly the input file's tensor
// names and shapes (PEFT's), the same values, and a config that parses to
// the same LoRA.
func TestSaveAdapterKeepsPEFTNamesAndShapes(t *testing.T) {
	for _, c := range loraCases {
		t.Run(c.name, func(t *testing.T) {
			f := loadLoRAFixture(t, c)
			out := t.TempDir()
			if err := SaveAdapter(out, f.alay, f.adapter, backend.F32, c.base); err != nil {
				t.Fatal(err)
			}
			headers := func(path string) map[string][]int {
				st, err := OpenSafetensors(path)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				m := map[string][]int{}
				for _, h := range st.Tensors() {
					m[h.Name] = h.Shape
				}
				return m
			}
			in := headers(filepath.Join("testdata", "lora", c.name, AdapterWeightsFile))
			got := headers(filepath.Join(out, AdapterWeightsFile))
			if len(in) != len(got) {
				t.Fatalf("saved %d tensors, the input adapter has %d", len(got), len(in))
			}
			for name, shape := range in {
				if !slices.Equal(got[name], shape) {
					t.Errorf("%s: saved shape %v, input %v", name, got[name], shape)
				}
			}
			back, err := LoadAdapter(out, f.alay)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(back, f.adapter) {
				t.Error("the saved adapter's values differ from the input's")
			}
			l, err := LoadAdapterConfig(out)
			if err != nil {
				t.Fatal(err)
			}
			want := f.alay.LoRA()
			if l.R != want.R || l.Alpha != want.Alpha || l.RSLoRA != want.RSLoRA || l.Scale() != want.Scale() {
				t.Errorf("saved config reads back as %+v, want %+v", l, want)
			}
			if _, err := NewAdapterLayout(f.cfg, l); err != nil {
				t.Errorf("saved target_modules %v: %v", l.Target, err)
			}
		})
	}
}

// TestMergeAdapterMatchesReference merges the fixtures' final adapters
// into their bases and compares every tensor with the reference script's
// W + s·B·A (float64, testdata/make_lora_fixtures.py) within 1e-6.
func TestMergeAdapterMatchesReference(t *testing.T) {
	for _, c := range loraCases {
		t.Run(c.name, func(t *testing.T) {
			f := loadLoRAFixture(t, c)
			final := make([]float32, f.alay.NumParams())
			for _, ten := range f.alay.Tensors() {
				v, _, err := f.ref.ReadFloat32("final." + ten.Name)
				if err != nil {
					t.Fatal(err)
				}
				copy(final[ten.Offset:], v)
			}
			lay := NewLayout(f.cfg)
			merged := slices.Clone(f.base)
			if err := MergeAdapter(lay, f.alay, merged, final); err != nil {
				t.Fatal(err)
			}
			changed := 0
			for _, ten := range lay.Tensors() {
				name := ten.Name
				want, h, err := f.ref.ReadFloat32("merged." + name)
				if err != nil {
					t.Fatal(err)
				}
				got := merged[ten.Offset : ten.Offset+ten.Len]
				if f.cfg.Arch == ArchGPT2 && len(h.Shape) == 2 && strings.Contains(name, ".weight") && !strings.HasPrefix(name, "w") {
					tr := make([]float32, len(got)) // Conv1D (in, out)
					transpose(tr, got, ten.Shape[0], ten.Shape[1])
					got = tr
				}
				for i := range want {
					if !closeTo(float64(got[i]), float64(want[i]), 1e-6, 0) {
						t.Fatalf("%s[%d] = %.9g, reference %.9g", name, i, got[i], want[i])
					}
				}
				if !slices.Equal(got, f.base[ten.Offset:ten.Offset+ten.Len]) {
					changed++
				}
			}
			if want := len(f.alay.Tensors()) / 2; changed != want {
				t.Errorf("%d base tensors changed by the merge, want %d (one per adapter)", changed, want)
			}
		})
	}
}

// TestParseAdapterConfigRefusesByKey checks that every unsupported
// adapter_config.json setting is refused with its key named, that PEFT's
// defaults and forms are read (lora_dropout a probability).
func TestParseAdapterConfigRefusesByKey(t *testing.T) {
	for _, c := range []struct{ json, key string }{
		{`{"r": 8, "target_modules": ["q_proj"], "lora_dropout": 1}`, "lora_dropout"},
		{`{"r": 8, "target_modules": ["q_proj"], "lora_dropout": -0.1}`, "lora_dropout"},
		{`{"r": 8, "target_modules": ["q_proj"], "bias": "all"}`, "bias"},
		{`{"r": 8, "target_modules": ["q_proj"], "modules_to_save": ["lm_head"]}`, "modules_to_save"},
		{`{"r": 8, "target_modules": ["q_proj"], "use_dora": true}`, "use_dora"},
		{`{"r": 8, "target_modules": ".*q_proj"}`, "target_modules"},
		{`{"r": 8}`, "target_modules"},
		{`{"r": 0, "target_modules": ["q_proj"]}`, "r "},
		{`{"peft_type": "IA3", "r": 8, "target_modules": ["q_proj"]}`, "peft_type"},
		{`{"r": 8, "target_modules": ["q_proj"], "layers_to_transform": [0]}`, "layers_to_transform"},
	} {
		_, err := ParseAdapterConfig([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("%s: error %v, want one naming %q", c.json, err, c.key)
		}
	}
	l, err := ParseAdapterConfig([]byte(`{"r": 16, "target_modules": "all-linear", "lora_dropout": 0.0, "bias": "none", "modules_to_save": null}`))
	if err != nil || l.R != 16 || l.Alpha != 8 || !slices.Equal(l.Target, []string{"all-linear"}) || l.Scale() != 0.5 {
		t.Errorf("all-linear with PEFT's default alpha: %+v, %v", l, err)
	}
	// A real adapter's settings (r 32, alpha 64, dropout 0.05).
	d, err := ParseAdapterConfig([]byte(`{"r": 32, "lora_alpha": 64, "lora_dropout": 0.05, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], "bias": "none"}`))
	if err != nil || d.Dropout != 0.05 || d.Scale() != 2 {
		t.Errorf("lora_dropout 0.05: %+v, %v", d, err)
	}
	cfg := tinyConfig
	lay, err := NewAdapterLayout(cfg, l)
	if err != nil {
		t.Fatal(err)
	}
	if got := lay.Modules(); !slices.Equal(got, []string{"c_attn", "c_proj", "c_fc", "c_proj"}) {
		t.Errorf("all-linear on GPT-2 adapts %v", got)
	}
	if _, err := NewAdapterLayout(cfg, LoRA{R: 4, Alpha: 8, Target: []string{"q_proj"}}); err == nil || !strings.Contains(err.Error(), "c_attn") {
		t.Errorf("a Llama target on GPT-2: %v, want the error to list GPT-2's layers", err)
	}
}
