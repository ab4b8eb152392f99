package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTensorBoardEventsForWandbSync: a run whose config enables wandb and
// tensorboard says W&B is not spoken and how to upload instead (wandb sync
// of the event files), and the event files it writes pass an independent
// reader (metrics/testdata/tfevents_check.py: TFRecord CRC-32C framing and
// tensorflow.Event decoding, as TensorBoard's and wandb's readers check
// them) with one train_loss scalar per step equal, in float32, to the
// step's loss in metrics.jsonl.
func TestTensorBoardEventsForWandbSync(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: the event-file reader is a Python script")
	}
	dir, modelCfg, _ := distFixture(t)
	tb := filepath.Join(dir, "tb")
	cfg := filepath.Join(dir, "ds.json")
	os.WriteFile(cfg, []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
		"optimizer": {"type": "AdamW", "params": {"lr": 3e-3}},
		"tensorboard": {"enabled": true, "output_path": "`+tb+`", "job_name": "job"},
		"wandb": {"enabled": true, "project": "seed003"}}`), 0o644)
	out := filepath.Join(dir, "run")
	stdout, stderr, err := run(t, "train", "--config", cfg, "--model", modelCfg, "--data", "synthetic", "--seq-len", "16", "--max-steps", "3",
		"--output-dir", out, "--threads", "1", "--metrics-addr", "off", "--peak-flops", "1e9", "--device", "cpu")
	if err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	if all := stdout + stderr; !strings.Contains(all, "wandb monitor is not supported") || !strings.Contains(all, "wandb sync --sync-tensorboard") {
		t.Errorf("no wandb advice:\n%s", all)
	}
	files, _ := filepath.Glob(filepath.Join(tb, "job", "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files %v", files)
	}
	b, err := exec.Command(py, "../../metrics/testdata/tfevents_check.py", files[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("tfevents_check.py: %v\n%s", err, b)
	}
	var losses []float64
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		var ev struct {
			Tag   string
			Step  int64
			Value float64
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if ev.Tag == "Train/Samples/train_loss" {
			losses = append(losses, ev.Value)
			// DeepSpeed's monitors count samples: 2 sequences per step here.
			if want := int64(2 * len(losses)); ev.Step != want {
				t.Errorf("loss %d at step %d, want the sample count %d", len(losses), ev.Step, want)
			}
		}
	}
	want := readLosses(t, filepath.Join(out, "metrics.jsonl"))
	if len(losses) != len(want) {
		t.Fatalf("%d losses in the event file, %d in metrics.jsonl", len(losses), len(want))
	}
	for i := range want {
		if float32(want[i]) != float32(losses[i]) {
			t.Errorf("step %d: event file %v, metrics.jsonl %v", i+1, losses[i], want[i])
		}
	}

	// A corrupted byte fails the reader: it checks, not just decodes.
	blob, _ := os.ReadFile(files[0])
	blob[len(blob)-6] ^= 0xff
	bad := filepath.Join(dir, "bad.tfevents")
	os.WriteFile(bad, blob, 0o644)
	if b, err := exec.Command(py, "../../metrics/testdata/tfevents_check.py", bad).CombinedOutput(); err == nil || !strings.Contains(string(b), "CRC mismatch") {
		t.Errorf("a corrupted event file passed: %v\n%s", err, b)
	}
}
