package model

import (
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// benchmarkStep times one forward+backward and reports tokens/s and model
// GFLOP/s by llm.c's FlopsPerToken.
func benchmarkStep(b *testing.B, preset string, B, T int, opts Options) {
	cfg, _ := Preset(preset)
	m, err := newTestModel(benchCPU(), cfg, opts, backend.F32)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Free()
	if err := m.SetParams(InitParams(cfg, 1)); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	inp, tgt := randomTokens(rng, B*T, cfg.V), randomTokens(rng, B*T, cfg.V)
	b.ResetTimer()
	for range b.N {
		if _, err := m.Forward(inp, tgt, B, T); err != nil {
			b.Fatal(err)
		}
		if err := m.Backward(1 / float32(B*T)); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(B*T)/sec, "tokens/s")
	b.ReportMetric(cfg.FlopsPerToken(T)*float64(B*T)/sec/1e9, "GFLOP/s")
}

// benchCPU runs on the BLAS training uses (OpenBLAS when present).
func benchCPU() backend.Backend {
	impl, _ := blas.Default(0)
	return cpu.New(cpu.Options{Gemm: impl})
}

func BenchmarkStepGPT2TinyB4T64(b *testing.B) { benchmarkStep(b, "gpt2-tiny", 4, 64, Options{}) }
func BenchmarkStepGPT2B4T64(b *testing.B)     { benchmarkStep(b, "gpt2", 4, 64, Options{}) }

// Activation checkpointing's cost: the goal is at most 1.4× the step time.
func BenchmarkStepGPT2TinyB8T256(b *testing.B) { benchmarkStep(b, "gpt2-tiny", 8, 256, Options{}) }
func BenchmarkStepGPT2TinyB8T256Checkpointed(b *testing.B) {
	benchmarkStep(b, "gpt2-tiny", 8, 256, Options{Checkpoint: true})
}
