package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestHostMemAvailable(t *testing.T) {
	const mi = "MemTotal:       16318412 kB\nMemFree:         1000000 kB\nMemAvailable:    8159206 kB\n"
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == memAvailableEnv {
				return v
			}
			return ""
		}
	}
	if n, src, ok, err := hostMemAvailable(env(""), strings.NewReader(mi)); !ok || err != nil || n != 8159206<<10 || src != "MemAvailable" {
		t.Errorf("meminfo: %d %q %v %v", n, src, ok, err)
	}
	if n, src, ok, _ := hostMemAvailable(env("1GiB"), strings.NewReader(mi)); !ok || n != 1<<30 || src != "$"+memAvailableEnv {
		t.Errorf("capped: %d %q %v", n, src, ok)
	}
	if n, _, _, _ := hostMemAvailable(env("1TiB"), strings.NewReader(mi)); n != 8159206<<10 {
		t.Errorf("a cap above MemAvailable raised it to %d", n)
	}
	if _, _, ok, _ := hostMemAvailable(env(""), strings.NewReader("MemTotal: 1 kB\n")); ok {
		t.Error("no MemAvailable, no cap: reported known")
	}
	if _, _, _, err := hostMemAvailable(env("lots"), nil); err == nil {
		t.Error("a bad cap was accepted")
	}
}

// remedyLine is a remedy with its predicted peak: "N. name: how — peak D / H".
var remedyLine = regexp.MustCompile(`(?m)^  (\d)\. ([^:]+): .* — peak ([^,]+),`)

// TestOOMBeforeStepOne: with host memory capped below the run's predicted
// peak, train stops before allocating (no metrics, no checkpoint), naming
// the shortfall and the remedies in order, each with its predicted peak;
// --skip-memory-check trains anyway; estimate --gpu-memory below the same
// peak prints the same remedies with the same peaks.
func TestOOMBeforeStepOne(t *testing.T) {
	dir, modelCfg, _ := distFixture(t)
	cfg := stageConfig(t, dir, 1, 2)
	out := filepath.Join(dir, "run")
	args := []string{"train", "--config", cfg, "--model", modelCfg, "--data", "synthetic", "--seq-len", "16", "--max-steps", "1",
		"--output-dir", out, "--threads", "1", "--metrics-addr", "off", "--peak-flops", "1e9", "--device", "cpu"}
	t.Setenv(memAvailableEnv, "64KiB")
	_, _, err := run(t, args...)
	if err == nil {
		t.Fatal("trained with 64 KiB of memory")
	}
	msg := err.Error()
	for _, want := range []string{"rank 0: out of memory before step 1", "more than the 64.0 KiB free ($" + memAvailableEnv + ")", "--skip-memory-check"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal lacks %q:\n%s", want, msg)
		}
	}
	got := remedyLine.FindAllStringSubmatch(msg, -1)
	names := []string{"activation checkpointing", "ZeRO-3", "optimizer offload", "parameter offload", "half the micro batch, twice the accumulation", "a shorter sequence"}
	if len(got) != len(names) {
		t.Fatalf("%d remedies, want %d:\n%s", len(got), len(names), msg)
	}
	for i, g := range got {
		if g[2] != names[i] {
			t.Errorf("remedy %s is %q, want %q", g[1], g[2], names[i])
		}
	}
	if _, err := os.Stat(filepath.Join(out, "metrics.jsonl")); err == nil {
		t.Error("the refused run wrote metrics")
	}

	// The same remedies and peaks from estimate for a GPU of 64 KiB.
	est, stderr, err := run(t, "estimate", "--config", cfg, "--model", modelCfg, "--seq-len", "16", "--gpu-memory", "64KiB")
	if err != nil {
		t.Fatalf("estimate: %v\n%s", err, stderr)
	}
	egot := remedyLine.FindAllStringSubmatch(est, -1)
	if len(egot) != len(got) {
		t.Fatalf("estimate --gpu-memory: %d remedies, train %d:\n%s", len(egot), len(got), est)
	}
	for i := range got {
		if egot[i][2] != got[i][2] || egot[i][3] != got[i][3] {
			t.Errorf("remedy %d: estimate %q peak %s, train %q peak %s", i+1, egot[i][2], egot[i][3], got[i][2], got[i][3])
		}
	}
	if !strings.Contains(est, "On a 64.0 KiB GPU: the predicted peak of") {
		t.Errorf("estimate does not say it is short:\n%s", est)
	}
	if est, _, _ := run(t, "estimate", "--config", cfg, "--model", modelCfg, "--seq-len", "16", "--gpu-memory", "48GiB"); !strings.Contains(est, "On a 48.0 GiB GPU: the run fits") {
		t.Errorf("estimate --gpu-memory 48GiB:\n%s", est)
	}

	stdout, stderr, err := run(t, append(args, "--skip-memory-check")...)
	if err != nil {
		t.Fatalf("--skip-memory-check: %v\n%s%s", err, stdout, stderr)
	}
	if n := len(readLosses(t, filepath.Join(out, "metrics.jsonl"))); n != 1 {
		t.Errorf("--skip-memory-check: %d steps logged", n)
	}
}

// TestOOMBeforeStepOneOnGPU: on a GPU the free memory is cuMemGetInfo's
// (the mock driver, its devices capped at 512 KiB): the run is refused
// naming the GPU's shortfall.
func TestOOMBeforeStepOneOnGPU(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	env := append(mockGPUEnv(t, 1), "GOTRAIN_MOCK_CUDA_MEMORY=524288")
	dir, modelCfg, _ := distFixture(t)
	cmd := gotrainCmd(t.Context(), "train", "--config", stageConfig(t, dir, 0, 2), "--model", modelCfg, "--data", "synthetic", "--seq-len", "16",
		"--max-steps", "1", "--output-dir", filepath.Join(dir, "gpu"), "--metrics-addr", "off", "--peak-flops", "1e9", "--device", "cuda")
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("trained on a 512 KiB GPU:\n%s", b)
	}
	for _, want := range []string{"out of memory before step 1", "per rank on the GPU is", "free on GPU 0 (cuMemGetInfo)", "1. activation checkpointing"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("output lacks %q:\n%s", want, b)
		}
	}
}
