package trainer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/model"
)

func TestRunFieldsNameWhatDiffers(t *testing.T) {
	dir := t.TempDir()
	shard := filepath.Join(dir, "train_000000.bin")
	if err := os.WriteFile(shard, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := func(lr string, seqLen int) Options {
		cfg, err := config.Parse("ds.json", []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
			"optimizer": {"type": "AdamW", "params": {"lr": `+lr+`}}}`), config.Options{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := cfg.Resolve(1)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := model.ByName("gpt2-tiny")
		return Options{Config: cfg, Batch: b, Model: m, Data: []string{filepath.Join(dir, "train_*.bin")},
			SeqLen: seqLen, MaxSteps: 10, OutputDir: dir, Version: "test"}
	}
	a, err := RunFields(opts("1e-3", 64))
	if err != nil {
		t.Fatal(err)
	}
	same, err := RunFields(opts("0.001", 64))
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffFields(a, same); len(d) != 0 {
		t.Errorf("the same run differs in %v", d)
	}
	b, err := RunFields(opts("2e-3", 128))
	if err != nil {
		t.Fatal(err)
	}
	d := DiffFields(a, b)
	if len(d) != 2 || d[0].Name != "config.optimizer.params.lr" || d[1].Name != "seq_len" || !d[0].Math || !d[1].Math {
		t.Fatalf("diff = %v, want lr and seq_len, both changing the math", d)
	}
	if got := d[0].String(); got != "config.optimizer.params.lr: 0.001 ≠ 0.002" {
		t.Errorf("diff line %q", got)
	}
	// A shard that grew is different data.
	if err := os.WriteFile(shard, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := RunFields(opts("1e-3", 64))
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffFields(a, c); len(d) != 1 || d[0].Name != "data" || d[0].Math {
		t.Errorf("diff after the shard grew = %v, want data only", d)
	}
}
