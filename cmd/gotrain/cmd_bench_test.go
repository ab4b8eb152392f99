package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/costmodel"
)

// bench --dry-run prices the trainer's real step without a device: every
// line says it is a cost model's, the table names the ops, and the totals
// give a step time and an MFU. It refuses to price the CPU backend.
func TestBenchDryRun(t *testing.T) {
	out, _, err := run(t, "bench", "--dry-run", "--gpu", "a100", "--model", "gpt2-tiny", "--batch", "2", "--seq-len", "64")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if !strings.HasPrefix(l, costmodel.Label+" | ") {
			t.Errorf("unlabelled line: %q", l)
		}
	}
	for _, want := range []string{"NVIDIA A100", "MatmulForward", "AttentionBackward", "AdamW", "step ", "MFU at most"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, "bench", "--dry-run", "--device", "cpu", "--model", "gpt2-tiny"); err == nil ||
		!strings.Contains(err.Error(), "--device cuda") {
		t.Errorf("--dry-run --device cpu: %v", err)
	}
	if _, _, err := run(t, "bench", "--dry-run", "--gpu", "tpu", "--model", "gpt2-tiny"); err == nil ||
		!strings.Contains(err.Error(), "h100") {
		t.Errorf("--gpu tpu: %v", err)
	}
}

// TestBenchCPUHonestNumbers: on the CPU, bench defaults to fp32 unless
// the GEMM multiplies bf16 natively (cpu.FastBF16), names the GEMM it used, takes MFU
// against that GEMM's roofline (so it is at most 100%), and refuses an
// unknown --blas.
func TestBenchCPUHonestNumbers(t *testing.T) {
	_, modelCfg, _ := distFixture(t)
	out, _, err := run(t, "bench", "--device", "cpu", "--model", modelCfg, "--batch", "2", "--seq-len", "16",
		"--steps", "2", "--threads", "1", "--blas", "go")
	if err != nil {
		t.Fatal(err)
	}
	// --dtype auto: bf16 only where the Go GEMM multiplies bf16 natively
	// (AVX512_BF16), where it is faster.
	dt := ", fp32,"
	if cpu.FastBF16(blas.NewGo(1)) {
		dt = ", bf16,"
	}
	for _, want := range []string{"BLAS go", "roofline", dt} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	i := strings.Index(out, "MFU ")
	if i < 0 {
		t.Fatalf("no MFU in:\n%s", out)
	}
	var mfu float64
	if _, err := fmt.Sscanf(out[i:], "MFU %f%%", &mfu); err != nil {
		t.Fatalf("MFU in %q: %v", out[i:], err)
	}
	if mfu <= 0 || mfu > 100 {
		t.Errorf("MFU %.1f%% outside (0, 100]:\n%s", mfu, out)
	}
	if _, _, err := run(t, "bench", "--device", "cpu", "--model", modelCfg, "--seq-len", "16", "--blas", "mkl"); err == nil || !strings.Contains(err.Error(), "mkl") {
		t.Errorf("--blas mkl: %v", err)
	}
}

// bench --cpuprofile writes a profile of the steps that go tool pprof
// reads (gzip-compressed protobuf: it starts with the gzip magic), and a
// path it cannot create is an error naming the flag, before any step runs.
func TestBenchCPUProfile(t *testing.T) {
	_, modelCfg, _ := distFixture(t)
	path := filepath.Join(t.TempDir(), "bench.prof")
	if _, _, err := run(t, "bench", "--device", "cpu", "--model", modelCfg, "--batch", "1", "--seq-len", "16",
		"--steps", "1", "--threads", "1", "--blas", "go", "--peak-flops", "1e12", "--cpuprofile", path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("--cpuprofile wrote %d bytes that are not a gzip-compressed profile", len(b))
	}
	bad := filepath.Join(t.TempDir(), "no-such-dir", "bench.prof")
	_, _, err = run(t, "bench", "--device", "cpu", "--model", modelCfg, "--seq-len", "16", "--blas", "go", "--cpuprofile", bad)
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("an uncreatable --cpuprofile path: %v", err)
	}
}
