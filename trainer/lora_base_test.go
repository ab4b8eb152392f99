package trainer_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// TestLoRARecordsAbsoluteBase: a LoRA run given a relative base name
// records it absolute, from the run's working directory, in the PEFT
// adapter_config.json and the tag's meta.json; checkpoint.FindAdapter
// finds the adapter and that base from the output directory, its
// checkpoints directory and the tag, and each loads the values the run
// wrote (an fp32 run: the tag's master values are the saved adapter's).
func TestLoRARecordsAbsoluteBase(t *testing.T) {
	f, in, l, alay := loraFixture(t)
	rel := filepath.Join("relative", "base")
	out := f.runIn(t, t.TempDir(), 1, 2, nil, func(o *trainer.Options) {
		o.LoRA = &trainer.LoRAOptions{Config: l, InitAdapter: in, BaseName: rel}
	})
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(wd, rel)
	saved, err := model.LoadAdapter(out, alay)
	if err != nil {
		t.Fatal(err)
	}
	tag := filepath.Join(out, "checkpoints", checkpoint.TagName(2))
	for _, path := range []string{out, filepath.Join(out, "checkpoints"), tag} {
		src, ok, err := checkpoint.FindAdapter(path)
		if err != nil || !ok {
			t.Fatalf("FindAdapter(%s): %v, %v", path, ok, err)
		}
		if src.Base != want {
			t.Errorf("%s records base %q, want %q", src.Record, src.Base, want)
		}
		if _, err := src.BaseDir(); err == nil {
			t.Errorf("BaseDir of the missing %s succeeded", want)
		}
		_, vals, err := src.Load(f.model)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(vals, saved) {
			t.Errorf("the adapter found from %s differs from the one the run saved", path)
		}
	}
	if _, ok, err := checkpoint.FindAdapter(f.dir); ok || err != nil {
		t.Errorf("FindAdapter on a model snapshot: %v, %v", ok, err)
	}
}
