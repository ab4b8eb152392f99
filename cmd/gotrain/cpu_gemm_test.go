package main

import (
	"testing"

	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/model"
)

// The GEMMs timed to choose the CPU GEMM are the run's own shapes, and a
// large model's are sliced to a few GFLOP each: the choice must not
// allocate a 637 GFLOP classifier's operands at start.
func TestGEMMShapesAreTheRunsClamped(t *testing.T) {
	tiny, _ := model.Preset("gpt2-tiny")
	got := gemmShapes(tiny, 8, 256)
	// The classifier keeps its 2,048 rows and 256-deep sum, on a slice of
	// the vocabulary.
	if c := got[3]; !c.TransB || c.M != 2048 || c.K != tiny.C || c.N < 4096 || c.N > tiny.Vp || c.Flops() > maxTimedFLOPs {
		t.Errorf("gpt2-tiny B8 T256 classifier shape %+v (%.3g FLOPs)", c, c.Flops())
	}
	if got[0] != (blas.Shape{TransB: true, M: 2048, N: tiny.FF, K: tiny.C}) {
		t.Errorf("gpt2-tiny MLP shape %+v", got[0])
	}
	big, _ := model.Preset("qwen3-0.6b")
	for _, s := range gemmShapes(big, 4, 4096) {
		if s.Flops() > maxTimedFLOPs || s.Flops() < maxTimedFLOPs/8 {
			t.Errorf("qwen3-0.6b B4 T4096 timed shape %+v: %.3g FLOPs, want within (%.3g, %.3g]", s, s.Flops(), maxTimedFLOPs/8, maxTimedFLOPs)
		}
	}
}
