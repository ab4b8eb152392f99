package config

import "testing"

func TestValuesIgnoresSpellingAndOrder(t *testing.T) {
	a, err := Parse("a.json", []byte(`{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
		"optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}}`), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.json", []byte(`// the same run
{
  "optimizer": {"params": {"lr": 0.0003}, "type": "AdamW"},
  "gradient_accumulation_steps": 2,
  "train_micro_batch_size_per_gpu": 4,
}`), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	va, vb := a.Values(), b.Values()
	if len(va) == 0 || len(va) != len(vb) {
		t.Fatalf("got %d and %d values", len(va), len(vb))
	}
	for i := range va {
		if va[i] != vb[i] {
			t.Errorf("value %d: %v against %v", i, va[i], vb[i])
		}
	}
	c, err := Parse("c.json", []byte(`{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}`), Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	var diff []string
	for i, kv := range c.Values() {
		if kv != va[i] {
			diff = append(diff, kv.Path)
		}
	}
	if len(diff) != 1 || diff[0] != "optimizer.params.lr" {
		t.Errorf("a changed lr differs in %v, want [optimizer.params.lr]", diff)
	}
}
