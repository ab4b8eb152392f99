package model

import (
	"fmt"
	"strings"
	"testing"
)

// tinyConfig is the shape of the gradient tests: small enough for float64
// finite differences over every parameter.
var tinyConfig = GPT2(Config{MaxT: 8, V: 11, Vp: 16, L: 2, NH: 2, C: 8})

func TestLayoutContiguous(t *testing.T) {
	for _, cfg := range []Config{tinyConfig, mustPreset(t, "gpt2"), mustPreset(t, "gpt2-tiny")} {
		lay := NewLayout(cfg)
		C := cfg.C
		off := 0
		for i, ts := range lay.Tensors() {
			if ts.Offset != off {
				t.Fatalf("%v: tensor %d %s at %d, want %d", cfg, i, ts.Name, ts.Offset, off)
			}
			n := 1
			for _, d := range ts.Shape {
				n *= d
			}
			if n != ts.Len {
				t.Fatalf("%s: Len %d, shape %v", ts.Name, ts.Len, ts.Shape)
			}
			off += ts.Len
		}
		if off != cfg.NumParams() || lay.NumParams() != cfg.NumParams() {
			t.Errorf("total %d, NumParams %d", off, cfg.NumParams())
		}
		if len(lay.Tensors()) != 2+12*cfg.L+2 {
			t.Errorf("%d tensors", len(lay.Tensors()))
		}
		// The ranges tile the buffer: embeddings, blocks 0..L-1, final LN.
		eo, en := lay.EmbeddingRange()
		if eo != 0 || en != cfg.Vp*C+cfg.MaxT*C {
			t.Errorf("embedding range %d,%d", eo, en)
		}
		next := en
		for l := 0; l < cfg.L; l++ {
			lo, ln := lay.LayerRange(l)
			if lo != next || ln != 12*C*C+13*C {
				t.Errorf("layer %d range %d,%d want %d,%d", l, lo, ln, next, 12*C*C+13*C)
			}
			for _, ts := range lay.Tensors() {
				inside := ts.Offset >= lo && ts.Offset+ts.Len <= lo+ln
				if inside != (ts.Layer == l) {
					t.Errorf("%s (layer %d) inside block %d range: %v", ts.Name, ts.Layer, l, inside)
				}
			}
			next = lo + ln
		}
		fo, fn := lay.FinalRange()
		if fo != next || fo+fn != cfg.NumParams() || fn != 2*C {
			t.Errorf("final range %d,%d", fo, fn)
		}
	}
}

func TestLayoutNamesShapesDecay(t *testing.T) {
	cfg := tinyConfig
	C := cfg.C
	lay := NewLayout(cfg)
	want := []struct {
		name  string
		shape []int
		decay bool
	}{
		{"wte.weight", []int{16, C}, true}, {"wpe.weight", []int{8, C}, true},
	}
	for l := 0; l < cfg.L; l++ {
		p := fmt.Sprintf("h.%d.", l)
		want = append(want, []struct {
			name  string
			shape []int
			decay bool
		}{
			{p + "ln_1.weight", []int{C}, false}, {p + "ln_1.bias", []int{C}, false},
			{p + "attn.c_attn.weight", []int{3 * C, C}, true}, {p + "attn.c_attn.bias", []int{3 * C}, false},
			{p + "attn.c_proj.weight", []int{C, C}, true}, {p + "attn.c_proj.bias", []int{C}, false},
			{p + "ln_2.weight", []int{C}, false}, {p + "ln_2.bias", []int{C}, false},
			{p + "mlp.c_fc.weight", []int{4 * C, C}, true}, {p + "mlp.c_fc.bias", []int{4 * C}, false},
			{p + "mlp.c_proj.weight", []int{C, 4 * C}, true}, {p + "mlp.c_proj.bias", []int{C}, false},
		}...)
	}
	want = append(want, struct {
		name  string
		shape []int
		decay bool
	}{"ln_f.weight", []int{C}, false}, struct {
		name  string
		shape []int
		decay bool
	}{"ln_f.bias", []int{C}, false})
	got := lay.Tensors()
	if len(got) != len(want) {
		t.Fatalf("%d tensors, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || !equalShape(g.Shape, w.shape) || g.Decay != w.decay {
			t.Errorf("tensor %d = %s %v decay=%v, want %s %v decay=%v", i, g.Name, g.Shape, g.Decay, w.name, w.shape, w.decay)
		}
		wantLayer := -1
		if strings.HasPrefix(w.name, "h.") {
			fmt.Sscanf(w.name, "h.%d.", &wantLayer)
		}
		if g.Layer != wantLayer {
			t.Errorf("%s: layer %d, want %d", g.Name, g.Layer, wantLayer)
		}
		if lk, ok := lay.Lookup(w.name); !ok || lk.Offset != g.Offset {
			t.Errorf("Lookup(%s) = %+v, %v", w.name, lk, ok)
		}
	}
	if _, ok := lay.Lookup("lm_head.weight"); ok {
		t.Error("lm_head.weight is tied, not a parameter")
	}
}
