package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/cuda/cudatest"
)

// e2eRow is one step of a doctor --e2e table.
type e2eRow struct {
	step                  int
	dev, ref, diff, limit float64
	verdict, model, dtype string
	tol                   float64 // the tolerance the run's summary states
	summaryVerdict        string  // PASS or FAIL, the run's
}

// parseE2E reads every step row of doctor --e2e's output, each with the
// model, dtype and stated tolerance of its table.
func parseE2E(t *testing.T, out string) []e2eRow {
	t.Helper()
	var rows, table []e2eRow
	for _, line := range strings.Split(out, "\n") {
		var r e2eRow
		if n, _ := fmt.Sscanf(line, "%d %g %g %g %g %s", &r.step, &r.dev, &r.ref, &r.diff, &r.limit, &r.verdict); n == 6 {
			table = append(table, r)
			continue
		}
		head, rest, ok := strings.Cut(line, ": ")
		if !ok || len(table) == 0 || !strings.Contains(rest, "tolerance ") {
			continue
		}
		f := strings.Fields(head)
		var tol float64
		if _, err := fmt.Sscanf(rest[strings.Index(rest, "tolerance ")+len("tolerance "):], "%g", &tol); err != nil {
			t.Fatalf("no tolerance in %q", line)
		}
		for _, r := range table {
			r.model, r.dtype, r.tol, r.summaryVerdict = strings.Join(f[:len(f)-1], " "), f[len(f)-1], tol, rest[:4]
			rows = append(rows, r)
		}
		table = nil
	}
	return rows
}

// checkE2E recomputes every row: |diff| from the two losses, the limit
// from the stated tolerance, the verdict from both; and returns the rows
// by "model dtype".
func checkE2E(t *testing.T, out string, steps int) map[string][]e2eRow {
	t.Helper()
	byRun := map[string][]e2eRow{}
	for _, r := range parseE2E(t, out) {
		diff, limit := math.Abs(r.dev-r.ref), r.tol*math.Abs(r.ref)
		if math.Abs(diff-r.diff) > 0.01*diff+1e-9 || math.Abs(limit-r.limit) > 0.01*limit+1e-12 {
			t.Errorf("%s %s step %d: printed |diff| %g, limit %g; the losses give %g, %g", r.model, r.dtype, r.step, r.diff,
				r.limit, diff, limit)
		}
		if want := map[bool]string{true: "PASS", false: "FAIL"}[diff <= limit]; r.verdict != want {
			t.Errorf("%s %s step %d: %s with |diff| %g, limit %g", r.model, r.dtype, r.step, r.verdict, diff, limit)
		}
		byRun[r.model+" "+r.dtype] = append(byRun[r.model+" "+r.dtype], r)
	}
	for k, rs := range byRun {
		if len(rs) != steps {
			t.Errorf("%s: %d steps printed, want %d", k, len(rs), steps)
		}
	}
	return byRun
}

// doctor --e2e on the emulated GPU trains the tiny Qwen3 and GPT-2 for 3
// steps on it and on the CPU backend: every step agrees within the stated
// tolerance (fp32 2e-5, bf16 2e-3 of the loss) and the command passes. The
// same check with a cuBLAS whose every product is 0.1% off fails in fp32
// and exits non-zero. On the CPU against itself every step agrees exactly.
func TestDoctorE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	env := mockGPUEnv(t, 1)
	args := []string{"doctor", "--e2e", "--shapes", "small", "--e2e-steps", "3", "--threads", "1"}
	out := runWithEnv(t, env, append(args, "--device", "cuda")...)
	runs := checkE2E(t, out, 3)
	logWorst(t, "emulated GPU", runs)
	for _, k := range []string{"qwen3-tiny fp32", "qwen3-tiny bf16", "gpt2 small fp32", "gpt2 small bf16"} {
		rs := runs[k]
		if len(rs) == 0 {
			t.Errorf("no table for %s:\n%s", k, out)
			continue
		}
		if want := map[string]float64{"fp32": 2e-5, "bf16": 2e-3}[rs[0].dtype]; rs[0].tol != want || rs[0].summaryVerdict != "PASS" {
			t.Errorf("%s: %s at tolerance %g, want PASS at %g", k, rs[0].summaryVerdict, rs[0].tol, want)
		}
	}
	if !strings.Contains(out, "e2e on cuda:0 (gotrain mock GPU") || !strings.Contains(out, "e2e passed") {
		t.Errorf("the run did not pass on the GPU:\n%s", out)
	}

	faulty := faultyGEMMEnv(t, env, "1e-3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := gotrainCmd(ctx, append(args, "--device", "cuda", "--dtype", "fp32")...)
	cmd.Env = append(cmd.Env, faulty...)
	b, err := cmd.CombinedOutput()
	fout := string(b)
	if err == nil || !strings.Contains(fout, "doctor --e2e: 2 of 2 runs differ from the CPU backend beyond tolerance") {
		t.Errorf("a GEMM 0.1%% off: err %v\n%s", err, fout)
	}
	fruns := checkE2E(t, fout, 3)
	logWorst(t, "GEMM 0.1% off", fruns)
	for k, rs := range fruns {
		if rs[0].summaryVerdict != "FAIL" {
			t.Errorf("a GEMM 0.1%% off: %s %s", k, rs[0].summaryVerdict)
		}
	}

	out = runWithEnv(t, env, append(args, "--device", "cpu")...)
	for k, rs := range checkE2E(t, out, 3) {
		for _, r := range rs {
			if r.dev != r.ref || r.tol != 0 || r.verdict != "PASS" {
				t.Errorf("cpu against itself, %s step %d: %g and %g at tolerance %g, %s", k, r.step, r.dev, r.ref, r.tol, r.verdict)
			}
		}
	}
	if len(checkE2E(t, out, 3)) != 4 || !strings.Contains(out, "e2e passed") {
		t.Errorf("cpu against itself:\n%s", out)
	}
}

// logWorst logs each run's largest |diff| relative to the CPU's loss.
func logWorst(t *testing.T, what string, runs map[string][]e2eRow) {
	t.Helper()
	for k, rs := range runs {
		w := 0.0
		for _, r := range rs {
			w = math.Max(w, r.diff/math.Abs(r.ref))
		}
		t.Logf("%s, %s: largest |diff| %.2g of the CPU's loss (tolerance %g)", what, k, w, rs[0].tol)
	}
}

// faultyGEMMEnv is env with cuBLAS and cuBLASLt built to be off by a
// relative err in every product (MOCK_GEMM_ERROR).
func faultyGEMMEnv(t *testing.T, env []string, err string) []string {
	t.Helper()
	out := []string{"GOTRAIN_LIBCUBLAS=" + cudatest.BuildMockCUBLAS(t, "MOCK_GEMM_ERROR="+err),
		"GOTRAIN_LIBCUBLASLT=" + cudatest.BuildMockCUBLASLt(t, "MOCK_GEMM_ERROR="+err)}
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GOTRAIN_LIBCUBLAS=") && !strings.HasPrefix(kv, "GOTRAIN_LIBCUBLASLT=") {
			out = append(out, kv)
		}
	}
	return out
}
