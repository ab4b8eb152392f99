package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/model"
)

// cpuGEMM is the CPU GEMM a command runs with and the machine's sgemm
// roofline its MFU is taken against.
type cpuGEMM struct {
	impl blas.Impl
	info blas.Info
	// why says how it was chosen: forced by --blas or $GOTRAIN_BLAS, or
	// measured against the other one.
	why string
	// roofline is the best sgemm rate measured on this machine, either
	// GEMM, in FLOP/s (0: not measured).
	roofline float64
	opts     blas.ChooseOptions
}

// raiseRoofline records a rate measured later (FLOP/s) in the machine's
// cache and returns the roofline, the higher of the two.
func (g *cpuGEMM) raiseRoofline(flops float64) float64 {
	g.roofline = blas.RecordRoofline(g.opts, flops/1e9) * 1e9
	return g.roofline
}

// describe is the BLAS part of a start-up line.
func (g cpuGEMM) describe() string {
	s := g.info.Name
	if g.info.CoreType != "" {
		s += " (" + g.info.CoreType + ")"
	}
	if g.why != "" {
		s += ": " + g.why
	}
	if g.info.Note != "" {
		s += " [" + g.info.Note + "]"
	}
	return s
}

// chooseCPUGEMM resolves --blas (flag "" or auto defers to $GOTRAIN_BLAS,
// then to measurement) for a run whose largest GEMMs are shapes. Auto
// times both GEMMs on those shapes once per machine (cached in the kernel
// cache directory) and takes the faster; a forced choice still gets the
// machine's roofline from the same measurement, so MFU means the same
// whichever GEMM runs. A forced openblas that cannot load is an error, so
// a comparison never silently times the wrong library.
func chooseCPUGEMM(flag string, threads int, shapes []blas.Shape) (cpuGEMM, error) {
	choice, from := strings.ToLower(strings.TrimSpace(flag)), "--blas"
	if choice == "" || choice == blas.ChoiceAuto {
		choice, from = strings.ToLower(strings.TrimSpace(os.Getenv(blas.EnvBLAS))), "$"+blas.EnvBLAS
	}
	opts := blas.ChooseOptions{Threads: threads, Shapes: shapes}
	if dir, err := kernels.DefaultCacheDir(); err == nil {
		opts.CacheDir = dir
	}
	best, c := blas.Choose(opts)
	g := cpuGEMM{roofline: c.Roofline * 1e9, opts: opts}
	switch choice {
	case "", blas.ChoiceAuto:
		g.impl, g.info, g.why = best, best.Info(), "chosen by measurement, "+c.Why()
		return g, nil
	case blas.ChoiceGo, blas.ChoiceOpenBLAS:
		impl, err := blas.Select(choice, threads)
		if err != nil {
			return g, fmt.Errorf("%s %s: %w", from, choice, err)
		}
		g.impl, g.info, g.why = impl, impl.Info(), "forced by "+from
		return g, nil
	}
	return g, fmt.Errorf("%s %q: want %s, %s or %s", from, choice, blas.ChoiceAuto, blas.ChoiceGo, blas.ChoiceOpenBLAS)
}

// gemmShapes are the largest fp32 GEMMs a step of cfg at micro-batch B and
// sequence length T runs on the CPU backend (its MatmulForward computes
// x·Wᵀ, the weight gradient doutᵀ·x): the MLP's up and down projections
// forward, the up projection's weight gradient, and one classifier block.
// Choosing the GEMM on these is choosing it on most of a step's FLOPs.
// A shape is clamped to at most maxTimedFLOPs (see timedShape).
func gemmShapes(cfg model.Config, B, T int) []blas.Shape {
	rows := B * T
	ff := max(cfg.FF, cfg.C)
	shapes := []blas.Shape{
		{TransB: true, M: rows, N: ff, K: cfg.C},
		{TransB: true, M: rows, N: cfg.C, K: ff},
		{TransA: true, M: ff, N: cfg.C, K: rows},
		{TransB: true, M: min(rows, model.LogitBlockRows), N: cfg.Vp, K: cfg.C},
	}
	for i, sh := range shapes {
		shapes[i] = timedShape(sh)
	}
	return shapes
}

// maxTimedFLOPs bounds one timed product: the choice is made in a fraction
// of a second at start (each product runs at least twice per GEMM), and a
// GEMM of a few GFLOP already runs at the rate of any larger one of its
// kind.
const maxTimedFLOPs = 8e9

// timedShape halves the largest dimension of s until its product is at
// most maxTimedFLOPs, keeping its transposes: a classifier (gpt2-tiny's
// 2,048 × 50,304 × 256 is 53 GFLOP, a Qwen3's 2,048 × 151,936 × 1,024 is
// 637) is timed on a slice of its vocabulary, and a large model's operands
// are never allocated whole.
func timedShape(s blas.Shape) blas.Shape {
	for s.Flops() > maxTimedFLOPs {
		switch {
		case s.M >= s.N && s.M >= s.K:
			s.M = (s.M + 1) / 2
		case s.N >= s.K:
			s.N = (s.N + 1) / 2
		default:
			s.K = (s.K + 1) / 2
		}
	}
	return s
}
