package model

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGenerationEOS reads eos_token_id as transformers' GenerationConfig
// holds it: one id or a list (Qwen3's [151645, 151643]); none when the
// file or the key is absent; a value of another kind is an error naming
// the file.
func TestGenerationEOS(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want []int
		bad  bool
	}{
		{`{"eos_token_id": 2, "top_k": 20}`, []int{2}, false},
		{`{"bos_token_id": 151643, "eos_token_id": [151645, 151643]}`, []int{151645, 151643}, false},
		{`{"eos_token_id": null}`, nil, false},
		{`{"top_k": 20}`, nil, false},
		{``, nil, false},
		{`{"eos_token_id": "</s>"}`, nil, true},
	} {
		dir := t.TempDir()
		if tc.doc != "" {
			os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(tc.doc), 0o644)
		}
		got, err := GenerationEOS(dir)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v (error %v)", tc.doc, got, err, tc.want, tc.bad)
		}
	}
}
