package trainer_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// TestLoRARunWritesPEFTAdapter trains LoRA adapters (started from a PEFT
// directory) on the frozen llama_gqa fixture for two steps on two ranks at
// ZeRO-3 through trainer.Run, and checks the output directory: a PEFT
// adapter whose names and shapes are the input's, whose values moved, and
// whose config reads back; no full model is written.
func TestLoRARunWritesPEFTAdapter(t *testing.T) {
	f := loadFamilyFixture(t, "llama_gqa")
	in := filepath.Join("..", "model", "testdata", "lora", "llama_gqa")
	l, err := model.LoadAdapterConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	alay, err := model.NewAdapterLayout(f.model, l)
	if err != nil {
		t.Fatal(err)
	}
	start, err := model.LoadAdapter(in, alay)
	if err != nil {
		t.Fatal(err)
	}
	stage3 := func(c map[string]any) { c["zero_optimization"] = map[string]any{"stage": 3} }
	out := f.runIn(t, t.TempDir(), 2, 2, stage3, func(o *trainer.Options) {
		o.LoRA = &trainer.LoRAOptions{Config: l, InitAdapter: in, BaseName: f.dir}
	})
	got, err := model.LoadAdapter(out, alay) // refuses other names or shapes
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(got, start) {
		t.Error("the saved adapter equals the initial one: nothing was trained")
	}
	back, err := model.LoadAdapterConfig(out)
	if err != nil || back.R != l.R || back.Alpha != l.Alpha || back.RSLoRA != l.RSLoRA {
		t.Errorf("saved adapter_config.json reads back as %+v (%v), want %+v", back, err, l)
	}
	if _, err := model.OpenSafetensors(filepath.Join(out, "model.safetensors")); err == nil {
		t.Error("a LoRA run wrote the full model")
	}
}
