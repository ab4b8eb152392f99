package model

import (
	"math/rand/v2"
	"testing"
)

// benchmarkStep times one forward+backward and reports tokens/s and model
// GFLOP/s by llm.c's FlopsPerToken.
func benchmarkStep(b *testing.B, preset string, B, T int) {
	cfg, _ := Preset(preset)
	m, err := New(newCPU(), cfg, Options{})
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

func BenchmarkStepGPT2TinyB4T64(b *testing.B) { benchmarkStep(b, "gpt2-tiny", 4, 64) }
func BenchmarkStepGPT2B4T64(b *testing.B)     { benchmarkStep(b, "gpt2", 4, 64) }
