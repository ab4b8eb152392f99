package config

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse: it must never panic, errors must be values of the documented
// types, and a config that loads must explain and resolve without panicking.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "seeds", "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{`{}`, `{"zero_optimization": true}`, `{"train_batch_size": "auto", "gradient_accumulation_steps": 3}`,
		`{"optimizer": {"type": "SGD", "params": {"betas": [1, 2]}}}`, "{\"a\": \"\\ud800\"}", `{"x": [{"y": [null]}],}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, strict := range []bool{true, false} {
			c, err := Parse("fuzz.json", data, Options{Strict: strict, Overrides: Overrides{TotalSteps: Some(10), Hidden: 64}})
			if err != nil {
				var es Errors
				if !errors.As(err, &es) || len(es) == 0 || err.Error() == "" {
					t.Fatalf("error %T %q is not a non-empty Errors", err, err)
				}
				for _, e := range es {
					if e == nil || e.File != "fuzz.json" {
						t.Fatalf("malformed error %+v", e)
					}
				}
			}
			if c == nil {
				continue
			}
			for _, ws := range []int{1, 3, 8} {
				_, _ = c.Resolve(ws)
			}
			if err == nil {
				_ = Explain(io.Discard, c, 2, 16)
			}
		}
	})
}
