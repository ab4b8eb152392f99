package didyoumean

import "testing"

func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"kitten", "sitting", 3},
		{"optimization", "optimziation", 1}, // one transposition
		{"ca", "abc", 3},                    // OSA distance (full Damerau would give 2)
		{"zero_optimisation", "zero_optimization", 1},
		{"cosineminratio", "cosminratio", 3},
	}
	for _, tc := range cases {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetry)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	keys := []string{"zero_optimization", "train_batch_size", "gradient_clipping", "bf16", "fp16"}
	cases := map[string]string{
		"zero_optimisation":  "zero_optimization",
		"ZeroOptimization":   "zero_optimization", // case and separators
		"zero-optimization":  "zero_optimization",
		"train_batch_sizes":  "train_batch_size",
		"gradient_clip":      "gradient_clipping", // fragment
		"bf61":               "bf16",              // one transposition
		"completely_unknown": "",
		"fp32":               "", // short keys need a close match: fp32 is 2 edits from fp16
	}
	for in, want := range cases {
		if got := Suggest(in, keys); got != want {
			t.Errorf("Suggest(%q) = %q, want %q", in, got, want)
		}
	}
}
