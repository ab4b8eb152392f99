package model

import (
	"math"
	"strings"
	"testing"
)

func meanStd(x []float32) (mean, std float64) {
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		d := float64(v) - mean
		std += d * d
	}
	return mean, math.Sqrt(std / float64(len(x)))
}

func TestInitStatistics(t *testing.T) {
	cfg := mustPreset(t, "gpt2-tiny")
	lay := NewLayout(cfg)
	p := InitParams(cfg, 1337)
	resid := 0.02 / math.Sqrt(2*float64(cfg.L))
	view := func(ts Tensor) []float32 { return p[ts.Offset : ts.Offset+ts.Len] }
	for _, ts := range lay.Tensors() {
		x := view(ts)
		var wantStd, wantConst float64 = 0, math.NaN()
		switch {
		case ts.Name == "wte.weight":
			for i, v := range x[cfg.V*cfg.C:] {
				if v != 0 {
					t.Fatalf("padded wte row %d is %v, want 0", cfg.V+i/cfg.C, v)
				}
			}
			x, wantStd = x[:cfg.V*cfg.C], 0.02
		case strings.HasSuffix(ts.Name, "c_proj.weight"):
			wantStd = resid
		case ts.Decay:
			wantStd = 0.02
		case strings.HasSuffix(ts.Name, ".weight"):
			wantConst = 1
		default:
			wantConst = 0
		}
		if !math.IsNaN(wantConst) {
			for _, v := range x {
				if float64(v) != wantConst {
					t.Fatalf("%s: element %v, want all %v", ts.Name, v, wantConst)
				}
			}
			continue
		}
		// The std estimate of n normal draws has relative error ≈ 1/sqrt(2n):
		// allow 6 of those, and a mean within 6 standard errors.
		mean, std := meanStd(x)
		n := float64(len(x))
		if math.Abs(std-wantStd) > 6*wantStd/math.Sqrt(2*n) || math.Abs(mean) > 6*wantStd/math.Sqrt(n) {
			t.Errorf("%s: mean %.3g std %.5g, want 0 and %.5g (n=%d)", ts.Name, mean, std, wantStd, len(x))
		}
	}
}

func TestInitDeterministic(t *testing.T) {
	a, b, c := InitParams(tinyConfig, 7), InitParams(tinyConfig, 7), InitParams(tinyConfig, 8)
	same, diff := true, false
	for i := range a {
		same = same && a[i] == b[i]
		diff = diff || a[i] != c[i]
	}
	if !same || !diff {
		t.Errorf("same seed equal: %v, other seed differs: %v", same, diff)
	}
}
