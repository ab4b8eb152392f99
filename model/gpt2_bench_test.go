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
	benchmarkStepConfig(b, cfg, B, T, opts)
}

func benchmarkStepConfig(b *testing.B, cfg Config, B, T int, opts Options) {
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
	b.ReportMetric(float64(m.ActivationBytes())/(1<<20), "act-MiB")
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

// GPT-2 (124M) at long sequences. Attention keeps a (B,NH,T) log-sum-exp per
// block where it kept (B,NH,T,T) probabilities (plus one more for their
// gradient): at B=1 that was 13·12·T²·4 B, 624 MiB at T=1024 and 2.4 GiB
// at T=2048; act-MiB reports what the activations take now. T=2048 runs
// GPT-2's shape with n_positions 2048.
func BenchmarkStepGPT2B1T1024(b *testing.B) { benchmarkStep(b, "gpt2", 1, 1024, Options{}) }
func BenchmarkStepGPT2B1T2048(b *testing.B) {
	cfg, _ := Preset("gpt2")
	cfg.MaxT = 2048
	benchmarkStepConfig(b, cfg, 1, 2048, Options{})
}
