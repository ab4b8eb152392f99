package main

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/launch"
)

// seedConfig is a seed config from config/testdata/seeds.
func seedConfig(name string) string {
	abs, _ := filepath.Abs(filepath.Join("..", "..", "config", "testdata", "seeds", name))
	return abs
}

// checkSyntheticRun asserts a finished run of steps steps on random ids over
// vocab: every step logged, the loss that of a uniform guess (ln V, which a
// model cannot beat on random ids), a checkpoint of the last step and the
// weights.
func checkSyntheticRun(t *testing.T, out string, steps, vocab int) {
	t.Helper()
	losses := readLosses(t, filepath.Join(out, "metrics.jsonl"))
	if len(losses) != steps {
		t.Fatalf("%s: %d steps logged, want %d", out, len(losses), steps)
	}
	for i, l := range losses {
		if math.Abs(l-math.Log(float64(vocab))) > 0.25 {
			t.Errorf("%s: step %d loss %.4f; random ids over %d should give about ln %d = %.4f", out, i+1, l, vocab, vocab, math.Log(float64(vocab)))
		}
	}
	latest, err := os.ReadFile(filepath.Join(out, "checkpoints", "latest"))
	if err != nil || strings.TrimSpace(string(latest)) != "global_step"+strconv.Itoa(steps) {
		t.Errorf("%s: checkpoints/latest = %q, %v; want global_step%d", out, latest, err, steps)
	}
	if _, err := os.Stat(filepath.Join(out, "model.safetensors")); err != nil {
		t.Errorf("%s: no weights: %v", out, err)
	}
}

// TestSeedShapesOnSyntheticData runs the seeds' own command shapes (000–004)
// with their own configs on 2 CPU ranks with --data synthetic: DeepSpeed's
// launcher flags (launch), the rendezvous, their ZeRO stages and offload,
// and the checkpoint at the end; seed 001's srun shape (ranks from Slurm's
// variables, no launcher) resumes from its checkpoint as the guide's
// --resume_from_checkpoint checkpoints/ does.
func TestSeedShapesOnSyntheticData(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, _ := distFixture(t) // vocab 64, n_positions 16
	common := []string{"--model", modelCfg, "--data", "synthetic", "--seq-len", "16", "--threads", "1", "--metrics-addr", "off", "--peak-flops", "1e9"}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	launchRun := func(t *testing.T, name string, launchArgs, trainArgs []string, want ...string) string {
		t.Helper()
		out := filepath.Join(dir, name)
		args := append(append(append(append([]string{"launch", "--master_port", "0"}, launchArgs...), "train"), trainArgs...), common...)
		args = append(args, "--max-steps", "2", "--output-dir", out)
		b, err := gotrainCmd(ctx, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gotrain %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: output lacks %q:\n%s", name, w, b)
			}
		}
		checkSyntheticRun(t, out, 2, 64)
		return string(b)
	}
	t.Run("000", func(t *testing.T) {
		// deepspeed --num_gpus=4 train.py --deepspeed --deepspeed_config ds_zero3_offload.json (the guide's OOM answer)
		launchRun(t, "000", []string{"--num_gpus=2"}, []string{"--deepspeed", "--deepspeed_config", seedConfig("000_ds_zero3_offload.json"), "--local_rank=0"},
			"2 rank(s), ZeRO stage 3, precision bf16")
	})
	t.Run("002", func(t *testing.T) {
		// srun deepspeed --num_gpus=8 --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT src/train.py --deepspeed config/ds_config.json
		port, err := launch.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		launchRun(t, "002", []string{"--num_gpus=2", "--master_addr=127.0.0.1", "--master_port=" + strconv.Itoa(port)},
			[]string{"--deepspeed", seedConfig("002_ds_config_example.json"), "--per_device_train_batch_size", "1"},
			"2 rank(s), ZeRO stage 2, precision bf16")
	})
	t.Run("003", func(t *testing.T) {
		// accelerate launch --config_file configs/accelerate_config_4gpu.yaml train_lora.py (BATCH_SIZE=1, GRADIENT_ACCUM=2)
		for _, f := range []string{"003_accelerate_config_4gpu.yaml", "deepspeed_zero2.json"} {
			b, err := os.ReadFile(filepath.Join("..", "..", "config", "testdata", "import", f))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, f), b, 0o644)
		}
		launchRun(t, "003", []string{"--config_file", filepath.Join(dir, "003_accelerate_config_4gpu.yaml"), "--nproc", "2"},
			[]string{"--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "2"},
			"2 rank(s), ZeRO stage 2, precision bf16")
	})
	t.Run("004", func(t *testing.T) {
		// CUDA_VISIBLE_DEVICES=0,1,2,3 deepspeed --num_gpus=4 train.py (ZeRO-3, both offloads, CPU activation checkpoints)
		launchRun(t, "004", []string{"--num_gpus=2"}, []string{"--deepspeed_config", seedConfig("004_deepspeed_config.json"),
			"--per_device_train_batch_size", "2", "--gradient_accumulation_steps", "4", "--learning_rate", "1e-4"},
			"2 rank(s), ZeRO stage 3")
	})
	t.Run("001", func(t *testing.T) {
		// sbatch train.sbatch: srun starts the ranks, which read SLURM_* (no launcher);
		// then the requeued job passes --resume_from_checkpoint checkpoints/.
		out := filepath.Join(dir, "001")
		os.MkdirAll(out, 0o755) // the job's working directory, where checkpoints/ is
		srun := func(steps int, extra ...string) {
			port, err := launch.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			args := append(append([]string{"train", "--deepspeed_config", seedConfig("001_ds_config.json"), "--allow-unknown-keys",
				"--max-steps", strconv.Itoa(steps), "--output-dir", out}, common...), extra...)
			var wg sync.WaitGroup
			outs := make([][]byte, 2)
			errs := make([]error, 2)
			for r := range 2 {
				cmd := gotrainCmd(ctx, args...)
				cmd.Dir = out
				cmd.Env = append(cmd.Env, "SLURM_JOB_ID=4242", "SLURM_STEP_ID=0", "SLURM_PROCID="+strconv.Itoa(r), "SLURM_LOCALID="+strconv.Itoa(r),
					"SLURM_NODEID=0", "SLURM_NTASKS=2", "SLURM_STEP_TASKS_PER_NODE=2", "SLURM_JOB_NODELIST=localhost",
					"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
				wg.Add(1)
				go func(r int, cmd *exec.Cmd) {
					defer wg.Done()
					outs[r], errs[r] = cmd.CombinedOutput()
				}(r, cmd)
			}
			wg.Wait()
			for r := range 2 {
				if errs[r] != nil {
					t.Fatalf("srun rank %d: %v\n%s", r, errs[r], outs[r])
				}
			}
			if !strings.Contains(string(outs[0]), "2 rank(s), ZeRO stage 2, precision bf16") {
				t.Errorf("rank 0:\n%s", outs[0])
			}
			if len(extra) > 0 && !strings.Contains(string(outs[0]), "resumed from global_step11") {
				t.Errorf("not resumed:\n%s", outs[0])
			}
		}
		// The seed's WarmupCosineLR warms up for 10 steps, which the run must exceed.
		srun(11)
		checkSyntheticRun(t, out, 11, 64)
		srun(12, "--resume_from_checkpoint", "checkpoints/", "--allow-config-change") // a longer run: its cosine ends later
		checkSyntheticRun(t, out, 12, 64)
	})
	t.Run("any vocabulary", func(t *testing.T) {
		// A preset resized to the vocabulary asked for; a config.json
		// refuses one larger than its own.
		out := filepath.Join(dir, "preset")
		stdout, stderr, err := run(t, "train", "--config", stageConfig(t, dir, 0, 1), "--model", "gpt2-tiny", "--data", "synthetic:300", "--seq-len", "8",
			"--max-steps", "1", "--output-dir", out, "--threads", "1", "--metrics-addr", "off", "--peak-flops", "1e9", "--device", "cpu")
		if err != nil {
			t.Fatalf("%v\n%s%s", err, stdout, stderr)
		}
		checkSyntheticRun(t, out, 1, 300)
		if _, _, err := run(t, "train", "--model", modelCfg, "--data", "synthetic:65", "--device", "cpu"); err == nil || !strings.Contains(err.Error(), "vocab_size 64") {
			t.Errorf("synthetic:65 on a 64-id model: %v", err)
		}
		if _, _, err := run(t, "train", "--model", modelCfg, "--data", "synthetic", "--data", "x.bin", "--device", "cpu"); err == nil || !strings.Contains(err.Error(), "cannot be mixed") {
			t.Errorf("synthetic with shards: %v", err)
		}
	})
}
