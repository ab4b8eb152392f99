package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gpuCheckSteps are the rows scripts/gpu-check.sh must report, in order,
// with whether each is required (its failure fails the script).
var gpuCheckSteps = []struct {
	name     string
	required bool
}{
	{"doctor", true}, {"selftest", true}, {"e2e", true}, {"e2e-bf16", true},
	{"bench-gpt2", true}, {"bench-qwen3", true}, {"zero3-train", true}, {"comm", true},
	{"torch-gpt2", false}, {"torch-qwen3", false}, {"cost-gpt2", true}, {"cost-qwen3", true},
}

// gpuCheckRow is one row of the summary table: | step | required | status | seconds | result |.
type gpuCheckRow struct {
	required      bool
	status, note  string
	seconds, line string
}

// TestGPUCheckScriptDryRun runs scripts/gpu-check.sh --dry-run end to end
// with this test binary as gotrain (see TestMain): every step on the CPU
// with tiny shapes, so the script a lent GPU runs first has had its
// plumbing run here. It checks the summary table row by row and the exit
// status against the rows.
func TestGPUCheckScriptDryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole dry run (about half a minute)")
	}
	for _, tool := range []string{"bash", "timeout", "awk", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("scripts/gpu-check.sh needs %s: %v", tool, err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../../scripts/gpu-check.sh", "--dry-run")
	// GOTRAIN_TEST_AS_MAIN makes this binary gotrain, also for the ranks
	// that gotrain launch starts from it.
	cmd.Env = append(os.Environ(), "GOTRAIN="+exe, "GOTRAIN_TEST_AS_MAIN=1", "OUT="+out, "TMPDIR="+t.TempDir())
	stdout, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the dry run did not finish in 3 minutes:\n%s", stdout)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatalf("no summary.md (exit %d): %v\n%s", code, err, stdout)
	}
	t.Logf("exit %d\n%s", code, summary)
	// bash's own complaints (an unbound variable, a missing function) mean
	// a broken script even where every row looks right.
	for _, line := range strings.Split(string(stdout), "\n") {
		if strings.Contains(line, "gpu-check.sh: line ") {
			t.Errorf("bash: %s", line)
		}
	}
	rows := parseGPUCheckSummary(string(summary))

	hasE2E := doctorHasFlag("e2e")
	wantFail := false
	for i, s := range gpuCheckSteps {
		r, ok := rows[s.name]
		if !ok {
			t.Errorf("summary has no row for step %s", s.name)
			continue
		}
		if r.required != s.required {
			t.Errorf("%s: required = %v, want %v", s.name, r.required, s.required)
		}
		if s.required && (r.status == "FAIL" || r.status == "TIMEOUT") {
			wantFail = true
		}
		log, _ := filepath.Glob(filepath.Join(out, "[0-9][0-9]-"+s.name+".log"))
		if len(log) != 1 || !strings.HasPrefix(filepath.Base(log[0]), fmt.Sprintf("%02d", i+1)) {
			t.Errorf("%s: want its log as %s-%s.log, found %q", s.name, fmt.Sprintf("%02d", i+1), s.name, log)
		}
		switch s.name {
		case "selftest":
			// No GPU here: a SKIP that says so, or a pass should selftest
			// learn to run on the CPU.
			if !(r.status == "PASS" || r.status == "SKIP" && strings.Contains(r.note, "needs a GPU")) {
				t.Errorf("selftest: %s %q, want PASS or a SKIP saying it needs a GPU", r.status, r.note)
			}
		case "e2e", "e2e-bf16":
			// doctor --e2e may not exist in this gotrain yet: the row must
			// then fail naming the flag; once it exists, pass on the CPU.
			if hasE2E && r.status != "PASS" {
				t.Errorf("%s: %s %q, want PASS (doctor has --e2e)", s.name, r.status, r.note)
			}
			if !hasE2E && (r.status != "FAIL" || !strings.Contains(r.note, "e2e")) {
				t.Errorf("%s: %s %q, want FAIL naming the missing --e2e flag", s.name, r.status, r.note)
			}
		case "torch-gpt2", "torch-qwen3":
			// PASS where a python with torch exists, else SKIP saying so.
			if !(r.status == "PASS" || r.status == "SKIP" && strings.Contains(r.note, "torch")) {
				t.Errorf("%s: %s %q, want PASS or a SKIP naming torch", s.name, r.status, r.note)
			}
		default:
			if r.status != "PASS" {
				t.Errorf("%s: %s %q, want PASS", s.name, r.status, r.note)
			}
		}
	}
	if len(rows) != len(gpuCheckSteps) {
		t.Errorf("summary has %d step rows, want %d", len(rows), len(gpuCheckSteps))
	}
	for _, want := range []string{"tokens/s", "MFU"} {
		if r := rows["bench-gpt2"]; !strings.Contains(r.note, want) {
			t.Errorf("bench-gpt2's result %q lacks %q", r.note, want)
		}
	}
	if r := rows["cost-qwen3"]; !strings.Contains(r.note, "not a measurement") {
		t.Errorf("cost-qwen3's result %q does not say the cost model is not a measurement", r.note)
	}
	if !strings.Contains(string(summary), "| gpt2-tiny | 2 × 64 |") {
		t.Error("the throughput table has no gpt2-tiny row")
	}
	if wantFail != (code == 1) || code > 1 {
		t.Errorf("exit status %d, but the rows say a required step failed: %v", code, wantFail)
	}
}

// parseGPUCheckSummary reads the step table of summary.md.
func parseGPUCheckSummary(s string) map[string]gpuCheckRow {
	rows := map[string]gpuCheckRow{}
	for _, line := range strings.Split(s, "\n") {
		// Cells may hold escaped pipes (\|); they never split a row.
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) != 7 || cells[0] != "" || cells[6] != "" {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(strings.ReplaceAll(cells[i], "\x00", "|"))
		}
		switch cells[3] {
		case "PASS", "FAIL", "SKIP", "TIMEOUT":
			rows[cells[1]] = gpuCheckRow{required: cells[2] == "yes", status: cells[3], seconds: cells[4], note: cells[5], line: line}
		}
	}
	return rows
}

// doctorHasFlag reports whether `gotrain doctor` takes --name.
func doctorHasFlag(name string) bool {
	for _, c := range newApp(io.Discard, io.Discard).Commands {
		if c.Name != "doctor" {
			continue
		}
		for _, f := range c.Flags {
			for _, n := range f.Names() {
				if n == name {
					return true
				}
			}
		}
	}
	return false
}
