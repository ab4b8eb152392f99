package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend/compare"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

// mockGPUEnv is the environment under which gotrain sees devices GPUs
// made of the mock driver, cuBLAS, cuBLASLt and NCCL, with every kernel
// running under the CPU emulation. It needs NVRTC (the mock driver loads
// PTX).
func mockGPUEnv(t *testing.T, devices int) []string {
	t.Helper()
	if _, err := kernels.LoadNVRTC(kernels.NVRTCOptions{}); err != nil {
		if os.Getenv("GOTRAIN_REQUIRE_NVRTC") == "1" {
			t.Fatal(err)
		}
		t.Skipf("NVRTC not available: %v", err)
	}
	emu.ForTest(t) // builds the kernels for emulation and sets its variable
	return []string{
		"GOTRAIN_LIBCUDA=" + cudatest.BuildMockDriver(t),
		"GOTRAIN_LIBCUBLAS=" + cudatest.BuildMockCUBLAS(t),
		"GOTRAIN_LIBCUBLASLT=" + cudatest.BuildMockCUBLASLt(t),
		"GOTRAIN_LIBNCCL=" + cudatest.BuildMockNCCL(t),
		emu.EnvLibrary + "=" + os.Getenv(emu.EnvLibrary),
		cudatest.EnvDevices + "=" + strconv.Itoa(devices),
		"GOTRAIN_CACHE=" + t.TempDir(),
	}
}

func runWithEnv(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := gotrainCmd(ctx, args...)
	cmd.Env = append(cmd.Env, env...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gotrain %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return string(b)
}

// Training on the (emulated) GPU follows the CPU run step for step: the
// same data, init and optimizer, only the kernels differ, so the losses
// agree to fp32 rounding.
func TestTrainOnCUDAMatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	env := mockGPUEnv(t, 1)
	dir, modelCfg, shard := distFixture(t)
	const steps = 8
	train := func(device, stage string) []float64 {
		out := filepath.Join(dir, device+stage)
		cfg := stageConfig(t, dir, map[string]int{"0": 0, "2": 2}[stage], 4)
		log := runWithEnv(t, env, "train", "--device", device, "--config", cfg, "--model", modelCfg, "--data", shard,
			"--seq-len", "16", "--max-steps", strconv.Itoa(steps), "--output-dir", out, "--peak-flops", "1e12",
			"--threads", "1", "--metrics-addr", "off")
		if device == "cuda" && !strings.Contains(log, "device cuda:0: gotrain mock GPU") {
			t.Errorf("the cuda run did not report the GPU:\n%s", log)
		}
		l := readLosses(t, filepath.Join(out, "metrics.jsonl"))
		if len(l) != steps {
			t.Fatalf("%s: %d steps logged\n%s", device, len(l), log)
		}
		return l
	}
	want := train("cpu", "0")
	for _, stage := range []string{"0", "2"} {
		got := train("cuda", stage)
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-4*math.Abs(want[i]) {
				t.Errorf("stage %s step %d: loss %.7f on cuda, %.7f on cpu", stage, i+1, got[i], want[i])
			}
		}
		t.Logf("stage %s: cuda losses %.6f … %.6f, cpu %.6f … %.6f", stage, got[0], got[steps-1], want[0], want[steps-1])
	}
	if want[steps-1] >= want[0] {
		t.Errorf("loss did not fall: %v", want)
	}

	// bf16: 16-bit parameters and activations round differently once the
	// two backends' fp32 intermediates differ in the last bit, so the
	// bound is bf16's resolution rather than fp32's.
	bf16 := filepath.Join(dir, "bf16.json")
	if err := os.WriteFile(bf16, []byte(`{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
		"optimizer": {"type": "AdamW", "params": {"lr": 3e-3}}, "bf16": {"enabled": true}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	losses := map[string][]float64{}
	for _, device := range []string{"cpu", "cuda"} {
		out := filepath.Join(dir, device+"-bf16")
		runWithEnv(t, env, "train", "--device", device, "--config", bf16, "--model", modelCfg, "--data", shard,
			"--seq-len", "16", "--max-steps", strconv.Itoa(steps), "--output-dir", out, "--threads", "1", "--metrics-addr", "off")
		losses[device] = readLosses(t, filepath.Join(out, "metrics.jsonl"))
	}
	for i := range losses["cpu"] {
		if g, c := losses["cuda"][i], losses["cpu"][i]; math.Abs(g-c) > 1e-2*math.Abs(c) {
			t.Errorf("bf16 step %d: loss %.5f on cuda, %.5f on cpu", i+1, g, c)
		}
	}
	t.Logf("bf16: cuda %.5f … %.5f, cpu %.5f … %.5f", losses["cuda"][0], losses["cuda"][steps-1], losses["cpu"][0], losses["cpu"][steps-1])
}

// --device auto picks the GPU when the driver, NVRTC and cuBLAS answer, and
// a local rank beyond the visible GPUs is a clear error.
func TestDeviceSelection(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	env := mockGPUEnv(t, 1)
	dir, modelCfg, shard := distFixture(t)
	log := runWithEnv(t, env, "train", "--device", "auto", "--config", stageConfig(t, dir, 0, 4), "--model", modelCfg,
		"--data", shard, "--seq-len", "16", "--max-steps", "1", "--output-dir", filepath.Join(dir, "auto"),
		"--threads", "1", "--metrics-addr", "off")
	if !strings.Contains(log, "device cuda:0") {
		t.Errorf("--device auto with a GPU present did not use it:\n%s", log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := gotrainCmd(ctx, "train", "--device", "cuda", "--config", stageConfig(t, dir, 0, 4), "--model", modelCfg,
		"--data", shard, "--seq-len", "16", "--max-steps", "1", "--output-dir", filepath.Join(dir, "lr1"),
		"--metrics-addr", "off")
	cmd.Env = append(cmd.Env, env...)
	cmd.Env = append(cmd.Env, "LOCAL_RANK=1", "RANK=1", "WORLD_SIZE=2", "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", "CUDA_VISIBLE_DEVICES=0")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "local rank 1 needs GPU 1 but the driver shows 1 (CUDA_VISIBLE_DEVICES=0)") {
		t.Errorf("local rank beyond the GPUs: err %v\n%s", err, b)
	}
}

// doctor --selftest on two emulated GPUs prints the op table, a GEMM
// figure and an all-reduce figure, and passes. With --shapes small its
// extended shapes run the multi-chunk attention path with grouped and
// multi-query heads in fp32 and bf16, and the classifier past 64K ids,
// each matching the CPU backend.
func TestDoctorSelftest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	env := mockGPUEnv(t, 2)
	out := runWithEnv(t, env, "doctor", "--selftest", "--shapes", "small", "--gemm-size", "64", "--collective-mib", "1",
		"--threads", "1")
	for _, want := range []string{"gpu 0: gotrain mock GPU (sm_80)", "layernorm dweight", "attention dqkv",
		"adamw master", "sum of squares", "rmsnorm dweight", "rotary+qknorm dqkv", "swiglu dinp", "extended shapes (--shapes small)",
		"gemm         bf16 64×64×64", "all-reduce   2 GPUs, bf16 1 MiB", "selftest passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("selftest output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("selftest reports failures:\n%s", out)
	}
	checkExtendedRows(t, out)
}

// checkExtendedRows finds in the selftest's output a passing row for every
// small attention shape and the classifier in fp32 and bf16, each
// attention row in several query chunks with 8 query heads a key/value
// head, bf16's accumulating dK and dV in fp32.
func checkExtendedRows(t *testing.T, out string) {
	t.Helper()
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || (f[0] != "attention" && f[0] != "classifier") || !strings.HasSuffix(line, " ok") {
			continue
		}
		seen[f[0]+" "+f[1]+" "+f[2]] = true
		if f[0] != "attention" {
			continue
		}
		var chunks, rows int
		i := strings.Index(line, " chunks of ")
		if i < 0 {
			t.Errorf("no chunks in %q", line)
			continue
		}
		if _, err := fmt.Sscanf(line[strings.LastIndex(line[:i], " ")+1:], "%d chunks of %d rows", &chunks, &rows); err != nil ||
			chunks < 2 || rows < 1 {
			t.Errorf("%q: %d chunks of %d rows (%v), want several", line, chunks, rows, err)
		}
		if !strings.Contains(line, "GQA 8:1") && !strings.Contains(line, "MQA 8:1") {
			t.Errorf("%q: no 8:1 head grouping", line)
		}
		if f[2] == "bf16" && !strings.Contains(line, "dK,dV in fp32 scratch") {
			t.Errorf("%q: bf16 over several chunks should accumulate dK and dV in fp32", line)
		}
	}
	for _, dt := range []string{"fp32", "bf16"} {
		for _, s := range compare.AttentionShapes(compare.Small) {
			if !seen["attention "+s.String()+" "+dt] {
				t.Errorf("no passing attention row for %s %s", s, dt)
			}
		}
		for _, s := range compare.ClassifierShapes(compare.Small) {
			if !seen["classifier "+s.String()+" "+dt] {
				t.Errorf("no passing classifier row for %s %s", s, dt)
			}
		}
	}
}

// gotrain bench --device cuda runs on the emulated GPU and reports tokens/s
// and MFU; its last-step loss is the CPU bench's (same init and tokens).
func TestBenchOnCUDA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	env := mockGPUEnv(t, 1)
	_, modelCfg, _ := distFixture(t)
	loss := func(device string) float64 {
		out := runWithEnv(t, env, "bench", "--device", device, "--model", modelCfg, "--batch", "2", "--seq-len", "16",
			"--steps", "2", "--dtype", "fp32", "--threads", "1", "--peak-flops", "1e12")
		if !strings.Contains(out, "tokens/s") || !strings.Contains(out, "MFU") {
			t.Errorf("bench --device %s output:\n%s", device, out)
		}
		i := strings.LastIndex(out, "loss ")
		if i < 0 {
			t.Fatalf("no loss in:\n%s", out)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(out[i+5:]), 64)
		if err != nil {
			t.Fatalf("loss in %q: %v", out, err)
		}
		if device == "cuda" && !strings.Contains(out, "bench cuda:0 | gotrain mock GPU (sm_80)") {
			t.Errorf("bench did not run on the GPU:\n%s", out)
		}
		return v
	}
	g, c := loss("cuda"), loss("cpu")
	if math.Abs(g-c) > 1e-3*math.Abs(c) {
		t.Errorf("bench loss %.4f on cuda, %.4f on cpu", g, c)
	}
}
