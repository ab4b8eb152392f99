package model

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// TestInitFromRefusesNonFiniteWeights: a NaN or Inf in --init-from weights
// loaded silently and surfaced at step 1 as a non-finite loss blamed on the
// learning rate. Reading the weights fails naming the tensor, whether
// it is stored as Conv1D (transposed on load), row-major, or in an llm.c
// file.
func TestInitFromRefusesNonFiniteWeights(t *testing.T) {
	cfg := hfTestConfig
	lay := NewLayout(cfg)
	for _, tc := range []struct {
		tensor string
		elem   int
		value  float32
		file   string
	}{
		{"h.0.mlp.c_fc.weight", 17, float32(math.NaN()), "model.safetensors"},
		{"ln_f.weight", 3, float32(math.Inf(1)), "model.safetensors"},
		{"h.1.attn.c_proj.bias", 0, float32(math.Inf(-1)), "model.bin"},
	} {
		t.Run(tc.tensor, func(t *testing.T) {
			params := randomParams(cfg, 5)
			ts, ok := lay.Lookup(tc.tensor)
			if !ok {
				t.Fatalf("no tensor %s", tc.tensor)
			}
			params[ts.Offset+tc.elem] = tc.value
			path := filepath.Join(t.TempDir(), tc.file)
			var err error
			if strings.HasSuffix(tc.file, ".bin") {
				err = SaveLLMC(path, cfg, params, backend.F32)
			} else {
				err = SaveHF(path, cfg, params, backend.F32)
			}
			if err != nil {
				t.Fatal(err)
			}
			c := cfg
			_, _, err = InitFrom(path, &c)
			want := []string{tc.tensor, path, "damaged or was saved from a run that diverged"}
			if err == nil {
				t.Fatalf("loading weights with %v in %s: no error", tc.value, tc.tensor)
			}
			for _, w := range want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), formatValue(tc.value)) {
				t.Errorf("error %q does not say the value is %v", err, tc.value)
			}
		})
	}
	// The control: the same files without the bad value load.
	params := randomParams(cfg, 5)
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := SaveHF(path, cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	c := cfg
	if _, _, err := InitFrom(path, &c); err != nil {
		t.Fatalf("finite weights: %v", err)
	}
}

func formatValue(v float32) string {
	switch {
	case math.IsNaN(float64(v)):
		return "NaN"
	case v > 0:
		return "+Inf"
	}
	return "-Inf"
}
