package model

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// hfTestConfig has V padded the standard way, as LoadHF derives it.
var hfTestConfig = GPT2(Config{MaxT: 8, V: 11, Vp: 128, L: 2, NH: 2, C: 8})

// randomParams fills every parameter with distinct-looking values (padded
// wte rows stay 0, as no file stores them).
func randomParams(cfg Config, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	p := make([]float32, cfg.NumParams())
	for i := range p {
		p[i] = float32(rng.NormFloat64())
	}
	for i := cfg.V * cfg.C; i < cfg.Vp*cfg.C; i++ {
		p[i] = 0
	}
	return p
}

func TestHFRoundTripAndLayout(t *testing.T) {
	cfg := hfTestConfig
	C := cfg.C
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	params := randomParams(cfg, 3)
	if err := SaveHF(path, cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	// Check the file's layout element by element, independently of LoadHF.
	st, err := OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	lay := NewLayout(cfg)
	ours := func(name string, r, c int) float32 { // our (out, in) element
		ts, _ := lay.Lookup(name)
		if len(ts.Shape) == 1 {
			return params[ts.Offset+c]
		}
		return params[ts.Offset+r*ts.Shape[1]+c]
	}
	conv := map[string][2]int{ // HF Conv1D shape (in, out)
		"h.1.attn.c_attn.weight": {C, 3 * C}, "h.0.attn.c_proj.weight": {C, C},
		"h.1.mlp.c_fc.weight": {C, 4 * C}, "h.0.mlp.c_proj.weight": {4 * C, C},
	}
	for name, shape := range conv {
		v, h, err := st.ReadFloat32(name)
		if err != nil || !equalShape(h.Shape, shape[:]) {
			t.Fatalf("%s: %v %v", name, h.Shape, err)
		}
		for i := 0; i < shape[0]; i++ {
			for o := 0; o < shape[1]; o++ {
				if v[i*shape[1]+o] != ours(name, o, i) {
					t.Fatalf("%s[%d][%d] is not our [%d][%d]", name, i, o, o, i)
				}
			}
		}
	}
	wte, h, _ := st.ReadFloat32("wte.weight")
	if !equalShape(h.Shape, []int{cfg.V, C}) || wte[5*C+3] != ours("wte.weight", 5, 3) {
		t.Errorf("wte shape %v", h.Shape)
	}
	if b, _, _ := st.ReadFloat32("h.1.ln_2.bias"); b[4] != ours("h.1.ln_2.bias", 0, 4) {
		t.Error("h.1.ln_2.bias differs")
	}
	if st.Metadata()["format"] != "pt" {
		t.Errorf("metadata %v", st.Metadata())
	}
	st.Close()

	// Without config.json: needs a fallback.
	if _, _, err := LoadHF(path, nil); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("no config: %v", err)
	}
	gotCfg, got, err := LoadHF(path, &cfg)
	if err != nil || gotCfg != cfg || !equalF32(got, params) {
		t.Fatalf("LoadHF with fallback: %+v, %v", gotCfg, err)
	}
	wrong := cfg
	wrong.L = 3
	if _, _, err := LoadHF(path, &wrong); err == nil || !strings.Contains(err.Error(), "L=2") {
		t.Errorf("mismatched fallback: %v", err)
	}
	// With config.json beside it.
	if err := WriteHFConfig(filepath.Join(dir, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	gotCfg, got, err = LoadHF(path, nil)
	if err != nil || gotCfg != cfg || !equalF32(got, params) {
		t.Fatalf("LoadHF with config.json: %+v, %v", gotCfg, err)
	}
	// InitFrom on the directory and on the file.
	for _, p := range []string{dir, path} {
		if c, got, err := InitFrom(p, nil); err != nil || c != cfg || !equalF32(got, params) {
			t.Errorf("InitFrom(%s): %v", p, err)
		}
	}
}

func TestHFBF16(t *testing.T) {
	cfg := hfTestConfig
	path := filepath.Join(t.TempDir(), "m.safetensors")
	params := randomParams(cfg, 4)
	if err := SaveHF(path, cfg, params, backend.BF16); err != nil {
		t.Fatal(err)
	}
	_, got, err := LoadHF(path, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range params {
		if want := backend.F32FromBF16(backend.BF16FromF32(params[i])); got[i] != want {
			t.Fatalf("param %d = %v, want bf16 %v", i, got[i], want)
		}
	}
}

// hfRewrite saves params under HF names transformed by rename, plus extra
// tensors, in F32.
func hfRewrite(t *testing.T, path string, cfg Config, params []float32, rename func(string) string, extra []NamedTensor, skip string) {
	t.Helper()
	tmp := path + ".orig"
	if err := SaveHF(tmp, cfg, params, backend.F32); err != nil {
		t.Fatal(err)
	}
	st, err := OpenSafetensors(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ts []NamedTensor
	for _, h := range st.Tensors() {
		if h.Name == skip {
			continue
		}
		_, raw, _ := st.Raw(h.Name)
		ts = append(ts, NamedTensor{Name: rename(h.Name), DType: backend.F32, Shape: h.Shape, Data: raw})
	}
	if err := SaveSafetensors(path, append(ts, extra...), nil); err != nil {
		t.Fatal(err)
	}
}

func TestHFPrefixTiedHeadAndBuffers(t *testing.T) {
	cfg := hfTestConfig
	dir := t.TempDir()
	path := filepath.Join(dir, "pt.safetensors")
	params := randomParams(cfg, 5)
	wte := EncodeFloat32(params[:cfg.V*cfg.C], backend.F32)
	mask := EncodeFloat32(make([]float32, 64), backend.F32)
	extra := []NamedTensor{
		{Name: "lm_head.weight", DType: backend.F32, Shape: []int{cfg.V, cfg.C}, Data: wte},
		{Name: "transformer.h.0.attn.bias", DType: backend.F32, Shape: []int{1, 1, 8, 8}, Data: mask},
		{Name: "transformer.h.1.attn.masked_bias", DType: backend.F32, Shape: []int{}, Data: EncodeFloat32([]float32{-1e4}, backend.F32)},
	}
	hfRewrite(t, path, cfg, params, func(s string) string { return "transformer." + s }, extra, "")
	c, got, err := LoadHF(path, &cfg)
	if err != nil || c != cfg || !equalF32(got, params) {
		t.Fatalf("prefixed file: %v", err)
	}

	// An untied head is refused.
	other := append([]byte(nil), wte...)
	other[0] ^= 1
	extra[0].Data = other
	hfRewrite(t, path, cfg, params, func(s string) string { return s }, extra[:1], "")
	if _, _, err := LoadHF(path, &cfg); err == nil || !strings.Contains(err.Error(), "lm_head.weight") || !strings.Contains(err.Error(), path) {
		t.Errorf("untied head: %v", err)
	}
}

func TestHFErrors(t *testing.T) {
	cfg := hfTestConfig
	dir := t.TempDir()
	params := randomParams(cfg, 6)
	path := filepath.Join(dir, "bad.safetensors")

	hfRewrite(t, path, cfg, params, func(s string) string { return s }, nil, "h.1.mlp.c_fc.bias")
	if _, _, err := LoadHF(path, &cfg); err == nil || !strings.Contains(err.Error(), `"h.1.mlp.c_fc.bias"`) || !strings.Contains(err.Error(), path) {
		t.Errorf("missing tensor: %v", err)
	}

	// A block weight stored in Linear (out, in) layout instead of Conv1D.
	C := cfg.C
	wrong := NamedTensor{Name: "h.0.attn.c_attn.weight", DType: backend.F32, Shape: []int{3 * C, C}, Data: make([]byte, 4*3*C*C)}
	hfRewrite(t, path, cfg, params, func(s string) string { return s }, []NamedTensor{wrong}, "h.0.attn.c_attn.weight")
	err := func() error { _, _, err := LoadHF(path, &cfg); return err }()
	if err == nil || !strings.Contains(err.Error(), "h.0.attn.c_attn.weight") || !strings.Contains(err.Error(), fmt.Sprint([]int{3 * C, C})) || !strings.Contains(err.Error(), fmt.Sprint([]int{C, 3 * C})) {
		t.Errorf("wrong shape: %v", err)
	}

	stray := NamedTensor{Name: "h.0.mlp.gate.weight", DType: backend.F32, Shape: []int{1}, Data: make([]byte, 4)}
	hfRewrite(t, path, cfg, params, func(s string) string { return s }, []NamedTensor{stray}, "")
	if _, _, err := LoadHF(path, &cfg); err == nil || !strings.Contains(err.Error(), "h.0.mlp.gate.weight") {
		t.Errorf("stray tensor: %v", err)
	}

	// Integer weights.
	ints := NamedTensor{Name: "ln_f.bias", DType: backend.I32, Shape: []int{C}, Data: make([]byte, 4*C)}
	hfRewrite(t, path, cfg, params, func(s string) string { return s }, []NamedTensor{ints}, "ln_f.bias")
	if _, _, err := LoadHF(path, &cfg); err == nil || !strings.Contains(err.Error(), "ln_f.bias") {
		t.Errorf("int tensor: %v", err)
	}

	os.WriteFile(path, []byte("not a model"), 0o644)
	if _, _, err := InitFrom(path, &cfg); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("garbage: %v", err)
	}
}
