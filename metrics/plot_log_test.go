package metrics

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadLogSplitsRecordsAndDropsTruncatedTail(t *testing.T) {
	body := `{"step":1,"loss":4.5,"lr":0.0001,"tokens_per_second":900,"memory":[{"device":{"params":1048576},"peak":{"device":2097152}}]}
{"step":2,"loss":null,"lr":0.0002,"grad_norm":null}

{"step":2,"val_loss":4.25,"val_batches":3}
{"step":3,"loss":4.0,"lr":0.00`
	steps, evals, err := ReadLog(writeFile(t, "metrics.jsonl", body))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || len(evals) != 1 {
		t.Fatalf("got %d steps, %d evals; want 2 and 1 (truncated step 3 dropped)", len(steps), len(evals))
	}
	if steps[0].Step != 1 || steps[0].Loss != 4.5 || steps[0].LR != 0.0001 || steps[0].TokensPerSecond != 900 {
		t.Errorf("step 1 = %+v", steps[0])
	}
	if got := steps[0].Memory[0]["device"]["params"]; got != 1<<20 {
		t.Errorf("step 1 device params = %d, want %d", got, 1<<20)
	}
	if !math.IsNaN(steps[1].Loss) || !math.IsNaN(steps[1].GradNorm) {
		t.Errorf("null loss/grad_norm should read as NaN, got %v, %v", steps[1].Loss, steps[1].GradNorm)
	}
	if steps[1].LR != 0.0002 {
		t.Errorf("step 2 lr = %v", steps[1].LR)
	}
	if evals[0] != (EvalRecord{Step: 2, ValLoss: 4.25, Batches: 3}) {
		t.Errorf("eval = %+v", evals[0])
	}
}

func TestReadLogErrorsNameFileAndLine(t *testing.T) {
	for name, body := range map[string]string{
		"bad middle line":          "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":\n{\"step\":3,\"loss\":1}\n",
		"bad terminated last line": "{\"step\":1,\"loss\":1}\n{oops}\n",
		"line without step":        "{\"step\":1,\"loss\":1}\n{\"loss\":1}\n",
	} {
		t.Run(name, func(t *testing.T) {
			p := writeFile(t, "metrics.jsonl", body)
			_, _, err := ReadLog(p)
			if err == nil || !strings.Contains(err.Error(), p+":2:") {
				t.Fatalf("err = %v, want one naming %s:2", err, p)
			}
		})
	}
	if _, _, err := ReadLog(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Error("missing file: want an error")
	}
}

func TestReadLogEmptyFileHasNoRecords(t *testing.T) {
	steps, evals, err := ReadLog(writeFile(t, "metrics.jsonl", ""))
	if err != nil || len(steps) != 0 || len(evals) != 0 {
		t.Fatalf("empty log: %d steps, %d evals, err %v", len(steps), len(evals), err)
	}
}
