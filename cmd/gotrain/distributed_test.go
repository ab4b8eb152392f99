package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotrain/gotrain/data"
)

// TestMain lets the test binary stand in for gotrain: `gotrain launch`
// re-executes its own binary for every rank, and with GOTRAIN_TEST_AS_MAIN
// set that binary runs the real main instead of the tests. With
// GOTRAIN_TEST_RANK_HELPER also set, a process that has a RANK (one that a
// launcher started) runs rankHelper instead of main, so launcher tests need
// no training.
func TestMain(m *testing.M) {
	if os.Getenv("GOTRAIN_TEST_AS_MAIN") == "1" {
		if mode := os.Getenv(rankHelperEnv); mode != "" && os.Getenv("RANK") != "" {
			os.Exit(rankHelper(mode))
		}
		if mode := os.Getenv(commFaultEnv); mode != "" && os.Getenv("RANK") == "1" {
			os.Exit(faultyDoctorMain(mode))
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// gotrainCmd runs this test binary as the gotrain command.
func gotrainCmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GOTRAIN_TEST_AS_MAIN=1")
	return cmd
}

// distFixture writes a byte-level model config, a token shard and a config
// per ZeRO stage into a temp dir.
func distFixture(t *testing.T) (dir, modelCfg, shard string) {
	t.Helper()
	dir = t.TempDir()
	modelCfg = filepath.Join(dir, "config.json")
	os.WriteFile(modelCfg, []byte(`{"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 32,
		"n_positions": 16, "vocab_size": 64}`), 0o644)
	tokens := make([]int32, 40*8*16+1)
	for i := range tokens {
		tokens[i] = int32((i*i + 7*i/3) % 64)
	}
	shard = filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, tokens); err != nil {
		t.Fatal(err)
	}
	return dir, modelCfg, shard
}

func stageConfig(t *testing.T, dir string, stage, micro int) string {
	t.Helper()
	f := filepath.Join(dir, fmt.Sprintf("ds_stage%d_micro%d.json", stage, micro))
	os.WriteFile(f, []byte(fmt.Sprintf(`{
		"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
		"optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
		"zero_optimization": {"stage": %d, "stage3_param_persistence_threshold": 100}
	}`, micro, stage)), 0o644)
	return f
}

func readLosses(t *testing.T, path string) []float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if l, ok := m["loss"].(float64); ok {
			out = append(out, l)
		}
	}
	return out
}

// TestLaunchedRanksMatchOneProcess: `gotrain launch --nproc 2 train` with each
// ZeRO stage optimizes the same global batches as one process does (llm.c's
// order gives rank r the r-th chunk), so every step's loss must agree within
// 1e-5 relative — the stage changes memory, never the math.
func TestLaunchedRanksMatchOneProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	const steps = 10
	train := func(out string, cfg string, extra ...string) {
		args := append(extra, "train", "--config", cfg, "--model", modelCfg, "--data", shard, "--seq-len", "16",
			"--max-steps", strconv.Itoa(steps), "--output-dir", out, "--peak-flops", "1e9", "--threads", "1")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if b, err := gotrainCmd(ctx, args...).CombinedOutput(); err != nil {
			t.Fatalf("gotrain %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	ref := filepath.Join(dir, "ref")
	train(ref, stageConfig(t, dir, 0, 4)) // one process, micro-batch 4
	want := readLosses(t, filepath.Join(ref, "metrics.jsonl"))
	if len(want) != steps {
		t.Fatalf("reference wrote %d steps", len(want))
	}
	for stage := 0; stage <= 3; stage++ {
		out := filepath.Join(dir, fmt.Sprintf("stage%d", stage))
		train(out, stageConfig(t, dir, stage, 2), "launch", "--nproc", "2", "--master_port", "0")
		got := readLosses(t, filepath.Join(out, "metrics.jsonl"))
		if len(got) != steps {
			t.Fatalf("stage %d: %d steps logged", stage, len(got))
		}
		t.Logf("stage %d on 2 ranks: losses %.6f … %.6f (one process: %.6f … %.6f)", stage, got[0], got[steps-1], want[0], want[steps-1])
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-5*math.Abs(want[i]) {
				t.Errorf("stage %d step %d: loss %.7f on 2 ranks, %.7f on 1", stage, i+1, got[i], want[i])
			}
		}
	}
}

// TestKilledRankStopsTheJob: kill -9 of one rank mid-training makes the
// launcher and the surviving rank exit within 30 s, and leaves no process
// behind. The survivor fails too ("lost rank 1"), often before the
// launcher sees the killed rank's exit; the launcher must still name rank 1
// in its verdict and exit 137, every time.
func TestKilledRankStopsTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	for trial := range 3 {
		killRankOneMidTraining(t, trial)
	}
}

func killRankOneMidTraining(t *testing.T, trial int) {
	dir, modelCfg, shard := distFixture(t)
	out := filepath.Join(dir, "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := gotrainCmd(ctx, "launch", "--nproc", "2", "--master_port", "0", "--log-dir", filepath.Join(dir, "logs"),
		"train", "--config", stageConfig(t, dir, 2, 2), "--model", modelCfg, "--data", shard, "--seq-len", "16",
		"--max-steps", "100000", "--output-dir", out, "--peak-flops", "1e9", "--threads", "1")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for training to run: rank 0 has logged a step.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl")); bytes.Count(b, []byte("\n")) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("training did not start:\n%s", output.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	ranks := childRanks(t, cmd.Process.Pid)
	if len(ranks) != 2 {
		cmd.Process.Kill()
		t.Fatalf("found rank processes %v, want 2", ranks)
	}
	killed := time.Now()
	if err := syscall.Kill(ranks[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	took := time.Since(killed)
	if code := cmd.ProcessState.ExitCode(); code != 137 {
		t.Errorf("trial %d: launcher exited %d after rank 1 was killed, want 137:\n%s", trial, code, output.String())
	}
	if took > 30*time.Second {
		t.Errorf("trial %d: launcher took %v to stop", trial, took)
	}
	// The verdict is the launcher's last line, as main prints the error.
	verdict := lastLines(output.String(), 1)
	if want := fmt.Sprintf("gotrain: rank 1 (pid %d) was killed by signal KILL", ranks[1]); !strings.HasPrefix(verdict, want) {
		t.Errorf("trial %d: verdict %q, want it to start with %q; launcher said:\n%s", trial, verdict, want, output.String())
	}
	if syscall.Kill(ranks[0], 0) == nil {
		t.Errorf("trial %d: rank 0 (pid %d) is still running", trial, ranks[0])
	}
	t.Logf("trial %d: stopped %v after the kill; launcher said:\n%s", trial, took.Round(time.Millisecond), lastLines(output.String(), 4))
}

// TestHungRankIsNamed: rank 1 stops answering mid-training (SIGSTOP: it
// neither computes nor dies, and SIGTERM stays pending); rank 0 times out
// waiting for it. The launcher must name rank 1, the rank the others
// waited for, not rank 0, whose exit it sees first.
func TestHungRankIsNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	out := filepath.Join(dir, "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := gotrainCmd(ctx, "launch", "--nproc", "2", "--master_port", "0", "--grace-period", "1s",
		"train", "--config", stageConfig(t, dir, 2, 2), "--model", modelCfg, "--data", shard, "--seq-len", "16",
		"--max-steps", "100000", "--output-dir", out, "--peak-flops", "1e9", "--threads", "1", "--comm-timeout", "2s",
		"--metrics-addr", "off")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl")); bytes.Count(b, []byte("\n")) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("training did not start:\n%s", output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ranks := childRanks(t, cmd.Process.Pid)
	if len(ranks) != 2 {
		cmd.Process.Kill()
		t.Fatalf("found rank processes %v, want 2", ranks)
	}
	if err := syscall.Kill(ranks[1], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	verdict := lastLines(output.String(), 1)
	if want := fmt.Sprintf("gotrain: rank 1 (pid %d) was killed by signal KILL (sent by gotrain launch", ranks[1]); !strings.HasPrefix(verdict, want) ||
		!strings.Contains(verdict, "rank 0 reported: ") {
		t.Errorf("verdict %q, want it to start with %q and give rank 0's report; launcher said:\n%s", verdict, want, output.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("launcher exited %d, want 1 (rank 0's failure, which started the stop)", code)
	}
	t.Logf("launcher said:\n%s", lastLines(output.String(), 3))
}

// childRanks returns the pids of launcherPid's children indexed by their
// RANK environment variable.
func childRanks(t *testing.T, launcherPid int) map[int]int {
	t.Helper()
	out := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command (which may hold spaces) start after ") ".
		rest := string(stat[bytes.LastIndexByte(stat, ')')+2:])
		f := strings.Fields(rest)
		if len(f) < 2 || f[1] != strconv.Itoa(launcherPid) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		for _, kv := range bytes.Split(env, []byte{0}) {
			if r, ok := strings.CutPrefix(string(kv), "RANK="); ok {
				if n, err := strconv.Atoi(r); err == nil {
					out[n] = pid
				}
			}
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
