package model

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// llmcNames is llm.c's tensor order (reference doc §5.1), spelled out here
// rather than taken from the package.
func llmcNames(L int) []string {
	names := []string{"wte.weight", "wpe.weight"}
	for _, s := range []string{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
		"attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"} {
		for l := 0; l < L; l++ {
			names = append(names, fmt.Sprintf("h.%d.%s", l, s))
		}
	}
	return append(names, "ln_f.weight", "ln_f.bias")
}

func TestLLMCRoundTripAndOrder(t *testing.T) {
	cfg := tinyConfig
	dir := t.TempDir()
	path := filepath.Join(dir, "m.bin")
	params := randomParams(cfg, 9)
	for i := cfg.V * cfg.C; i < cfg.Vp*cfg.C; i++ {
		params[i] = 0
	}
	if err := SaveLLMC(path, cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if len(raw) != 1024+4*cfg.NumParams() {
		t.Fatalf("file is %d bytes", len(raw))
	}
	hdr := make([]int32, 8)
	for i := range hdr {
		hdr[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if want := []int32{20240326, 3, 8, 11, 2, 2, 8, 16}; fmt.Sprint(hdr) != fmt.Sprint(want) {
		t.Errorf("header %v, want %v", hdr, want)
	}
	lay := NewLayout(cfg)
	pos := 1024
	for _, name := range llmcNames(cfg.L) {
		ts, _ := lay.Lookup(name)
		for i := 0; i < ts.Len; i++ {
			got := math.Float32frombits(binary.LittleEndian.Uint32(raw[pos:]))
			if got != params[ts.Offset+i] {
				t.Fatalf("file byte %d: %s[%d] = %v, want %v", pos, name, i, got, params[ts.Offset+i])
			}
			pos += 4
		}
	}
	c, got, err := LoadLLMC(path)
	if err != nil || c != cfg || !equalF32(got, params) {
		t.Fatalf("LoadLLMC: %+v %v", c, err)
	}
	// InitFrom by extension and by magic.
	noext := filepath.Join(dir, "model")
	os.WriteFile(noext, raw, 0o644)
	for _, p := range []string{path, noext} {
		if c, got, err := InitFrom(p, nil); err != nil || c != cfg || !equalF32(got, params) {
			t.Errorf("InitFrom(%s): %v", p, err)
		}
	}

	// Version 5 stores bf16.
	if err := SaveLLMC(path, cfg, params, backend.BF16); err != nil {
		t.Fatal(err)
	}
	raw5, _ := os.ReadFile(path)
	if len(raw5) != 1024+2*cfg.NumParams() || binary.LittleEndian.Uint32(raw5[4:]) != 5 {
		t.Fatalf("bf16 file: %d bytes, version %d", len(raw5), binary.LittleEndian.Uint32(raw5[4:]))
	}
	_, got, err = LoadLLMC(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range params {
		if want := backend.F32FromBF16(backend.BF16FromF32(params[i])); got[i] != want {
			t.Fatalf("param %d = %v, want %v", i, got[i], want)
		}
	}
	if err := SaveLLMC(path, cfg, params, backend.F16); err == nil {
		t.Error("fp16 llm.c file written")
	}
}

func TestLLMCCorrupt(t *testing.T) {
	cfg := tinyConfig
	dir := t.TempDir()
	good := filepath.Join(dir, "good.bin")
	if err := SaveLLMC(good, cfg, randomParams(cfg, 1), backend.F32); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(good)
	patch := func(idx int, v int32) []byte {
		b := append([]byte(nil), raw...)
		binary.LittleEndian.PutUint32(b[4*idx:], uint32(v))
		return b
	}
	cases := map[string][]byte{
		"magic":       patch(0, 20240520),
		"version":     patch(1, 4),
		"truncated":   raw[:len(raw)-4],
		"extra":       append(append([]byte(nil), raw...), 0, 0, 0, 0),
		"header only": raw[:1000],
		"heads":       patch(5, 3),
		"huge":        patch(6, 1<<30),
		"vp":          patch(7, 5),
	}
	for name, b := range cases {
		path := filepath.Join(dir, name+".bin")
		os.WriteFile(path, b, 0o644)
		if _, _, err := LoadLLMC(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v should name %s", name, err, path)
		}
	}
}
