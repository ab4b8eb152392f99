package config

import (
	"errors"
	"strings"
	"testing"
)

const testFile = "ds_test.json"

// parseCfg parses src and splits the result into the config and its error list.
func parseCfg(t *testing.T, src string, opts Options) (*Config, Errors) {
	t.Helper()
	c, err := Parse(testFile, []byte(src), opts)
	if err == nil {
		return c, nil
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse returned %T (%v), want config.Errors", err, err)
	}
	return c, es
}

// mustParse parses src strictly (plus opts) and fails on any error.
func mustParse(t *testing.T, src string, ov Overrides) *Config {
	t.Helper()
	c, es := parseCfg(t, src, Options{Strict: true, Overrides: ov})
	if len(es) > 0 {
		t.Fatalf("unexpected errors:\n%v", es)
	}
	return c
}

// errAt returns the first error whose path is path, or nil.
func errAt(es Errors, path string) *Error {
	for _, e := range es {
		if e.Path == path {
			return e
		}
	}
	return nil
}

// warnAt returns the first warning whose path is path, or nil.
func warnAt(ws []Warning, path string) *Warning {
	for i := range ws {
		if ws[i].Path == path {
			return &ws[i]
		}
	}
	return nil
}

func containsAll(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q does not contain %q", what, s, sub)
		}
	}
}
