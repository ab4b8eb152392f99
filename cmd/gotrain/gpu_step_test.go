package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
)

// stepCounter snapshots the mock libraries' counters after every step.
type stepCounter struct {
	t      *testing.T
	cnt    *cudatest.Counters
	counts []cudatest.Counts // after step 1, 2, …
}

func (s *stepCounter) ObserveStep(metrics.StepRecord, backend.MemoryStats, metrics.CommCounters) {
	s.counts = append(s.counts, s.cnt.Snapshot(s.t))
}

// The structure of a steady-state training step on an emulated GPU, as the
// mock driver and cuBLAS count it between the ends of steps 2 and 3 (step
// 1 allocates the scratch every later step reuses): no allocation; fp32
// activations run every GEMM in true fp32 (CUBLAS_COMPUTE_32F with fp32
// operands, never TF32, so results match the CPU); bf16 activations run
// only bf16 GEMMs (the fused classifier keeps dlogits bf16); at most two
// host synchronisations per optimizer step and no blocking upload. For a
// tiny GPT-2 and a tiny Qwen3. The log prints each step's line in the
// format the GPU work is tracked by ("bf16 step: 0 fp32 GEMMs, 1 host
// syncs, 0 allocations, N launches").
func TestGPUStepStructure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs training steps under the kernel emulation")
	}
	for _, kv := range mockGPUEnv(t, 1) {
		k, v, _ := strings.Cut(kv, "=")
		if k != "GOTRAIN_CACHE" { // the kernel cache a normal run uses: no recompiling
			t.Setenv(k, v)
		}
	}
	cnt := cudatest.NewCounters(t)
	gpu, err := openGPU(0, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	dir := t.TempDir()
	gpt2Path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(gpt2Path, []byte(`{"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 32,
		"n_positions": 32, "vocab_size": 100}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{gpt2Path, qwen3Fixture(t, dir)} {
		cfg, err := model.ByName(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []backend.DType{backend.BF16, backend.F32} {
			gpuStepStructure(t, gpu, cnt, cfg, dt)
		}
	}
}

// gpuStepStructure trains cfg for three steps and checks step 3's counts.
func gpuStepStructure(t *testing.T, gpu *gpuRank, cnt *cudatest.Counters, cfg model.Config, dt backend.DType) {
	sc := &stepCounter{t: t, cnt: cnt}
	if _, err := runBenchTrainer(gpu.be, cfg, 2, 32, 3, dt, false, sc); err != nil {
		t.Fatal(err)
	}
	if len(sc.counts) != 3 {
		t.Fatalf("%s %s: observed %d steps, want 3", cfg.Arch, dt, len(sc.counts))
	}
	d := sc.counts[2].Sub(sc.counts[1])
	t.Logf("%s: %s", cfg.Arch, d.StepLine(dt.String()))
	t.Logf("%s %s step detail: %s", cfg.Arch, dt, d.Detail())
	if d.Allocations() != 0 || d.DeviceFrees+d.PinnedFrees != 0 {
		t.Errorf("%s %s: a steady-state step allocates %d and frees %d times", cfg.Arch, dt, d.Allocations(), d.DeviceFrees+d.PinnedFrees)
	}
	if d.Launches == 0 || d.HostSyncs() == 0 {
		t.Errorf("%s %s: %d launches and %d host syncs: the counters saw no step", cfg.Arch, dt, d.Launches, d.HostSyncs())
	}
	// The gradient norm's read and the end of the step; the loss rides
	// along with the first, and the inputs go up asynchronously.
	if n := d.HostSyncs(); n > 2 {
		t.Errorf("%s %s: %d host syncs per optimizer step, want ≤ 2", cfg.Arch, dt, n)
	}
	if d.BlockingHtoD != 0 {
		t.Errorf("%s %s: %d blocking host-to-device copies, want inputs and targets staged asynchronously", cfg.Arch, dt, d.BlockingHtoD)
	}
	switch dt {
	case backend.F32:
		if n, all := d.GEMMs[cudatest.InF32][cudatest.Compute32F], d.AllGEMMCalls(); n == 0 || n != all {
			t.Errorf("%s fp32 step: %d of %d GEMMs are fp32 with CUBLAS_COMPUTE_32F, want all", cfg.Arch, n, all)
		}
	case backend.BF16:
		if n, all := d.GEMMs[cudatest.InBF16][cudatest.Compute32F], d.AllGEMMCalls(); n == 0 || n != all {
			t.Errorf("%s bf16 step: %d of %d GEMMs are bf16 with CUBLAS_COMPUTE_32F, want all (no fp32 GEMM)", cfg.Arch, n, all)
		}
	}
}
