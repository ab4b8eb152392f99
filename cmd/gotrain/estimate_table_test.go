package main

import (
	"strings"
	"testing"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

func parseEstimateConfig(t *testing.T, js string, world int) *config.Config {
	t.Helper()
	cfg, err := config.Parse("est.json", []byte(js), config.Options{Strict: true, Overrides: config.Overrides{WorldSize: world}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestFormatEstimateTable(t *testing.T) {
	m, _ := model.Preset("gpt2")
	cfg := parseEstimateConfig(t, `{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 3}, "activation_checkpointing": {}}`, 8)
	est, err := trainer.Estimate(cfg, m, 8, 1024, trainer.EstimateOptions{Nodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := formatEstimate(&b, est); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Ψ = 124,475,904", "N = 8 ranks on 2 nodes", "ZeRO stage 3", "parameters", "gradients",
		"master weights", "optimizer states", "activations (not used)", "activations (checkpointed) *", "buffers",
		"total (steady)", "peak (during a step)", "host per node (4 ranks)", "estimate_zero3_model_states_mem_needs"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
