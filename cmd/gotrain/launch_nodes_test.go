package main

import (
	"context"
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

// TestLaunchNodeRank: seed 002's per-node launcher shape (--num_nodes 2
// --node_rank N --master_addr --master_port, the same command on every
// node, one with DeepSpeed's --no_ssh) trains one job of 2 ranks from two
// separately started launchers sharing GOTRAIN_JOB_SECRET, with
// --enable_each_rank_log and --bind_cores_to_rank; each node's log
// directory holds its rank's log (rank 0's with the steps). Started separately without a shared
// secret, or without --master_addr, they are refused.
func TestLaunchNodeRank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, _ := distFixture(t)
	port, err := launch.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(dir, "run")
	node := func(rank int, extra ...string) *exec.Cmd {
		args := append([]string{"launch", "--num_nodes", "2", "--nproc", "1", "--node_rank", strconv.Itoa(rank), "--master_addr", "127.0.0.1",
			"--master_port", strconv.Itoa(port), "--enable_each_rank_log", filepath.Join(dir, "logs"+strconv.Itoa(rank)), "--bind_cores_to_rank"}, extra...)
		args = append(args, "train", "--config", stageConfig(t, dir, 2, 2), "--model", modelCfg, "--data", "synthetic", "--seq-len", "16",
			"--max-steps", "2", "--output-dir", out, "--threads", "1", "--metrics-addr", "off", "--peak-flops", "1e9")
		cmd := gotrainCmd(ctx, args...)
		cmd.Env = append(cmd.Env, launch.JobSecretEnv+"="+strings.Repeat("ab", 32))
		return cmd
	}
	cmds := []*exec.Cmd{node(0), node(1, "--no_ssh")}
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range cmds {
		if errs[i] != nil {
			t.Fatalf("node %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	if !strings.Contains(string(outs[0]), "2 rank(s), ZeRO stage 2") || !strings.Contains(string(outs[0]), "node 0 of 2: 1 of 2 ranks") {
		t.Errorf("node 0:\n%s", outs[0])
	}
	checkSyntheticRun(t, out, 2, 64)
	for r := range 2 {
		b, err := os.ReadFile(filepath.Join(dir, "logs"+strconv.Itoa(r), "rank_"+strconv.Itoa(r)+".log"))
		if err != nil {
			t.Fatal(err)
		}
		// Rank 0 speaks for the job; rank 1's log exists, empty when all went well.
		if r == 0 && !strings.Contains(string(b), "step 2/2") {
			t.Errorf("rank_0.log lacks the steps:\n%s", b)
		}
	}

	// Refusals: no shared secret; no master address; a node rank outside the job.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--num_nodes", "2", "--node_rank", "1", "--master_addr", "127.0.0.1", "train"}, "export GOTRAIN_JOB_SECRET="},
		{[]string{"launch", "--num_nodes", "2", "--node_rank", "1", "train"}, "needs --master_addr"},
		{[]string{"launch", "--num_nodes", "2", "--node_rank", "2", "--master_addr", "127.0.0.1", "train"}, "--node_rank 2, but the job has 2 node(s)"},
		{[]string{"launch", "--no_ssh", "train"}, "--no_ssh needs --node_rank"},
	} {
		t.Setenv(launch.JobSecretEnv, "")
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestSrunLaunchRefused: `srun --nodes=2 gotrain launch --nproc 8 train ...`
// (seed 002's srun deepspeed shape) is refused with the srun command that
// starts the ranks directly, and the launch --launcher slurm alternative.
func TestSrunLaunchRefused(t *testing.T) {
	for k, v := range map[string]string{"SLURM_PROCID": "1", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NUM_NODES": "2"} {
		t.Setenv(k, v)
	}
	_, _, err := run(t, "launch", "--num_gpus=8", "--master_port", "29500", "train", "--deepspeed", "ds_config.json")
	if err == nil {
		t.Fatal("srun gotrain launch was accepted")
	}
	for _, want := range []string{"started by srun as task 1 of 2 on 2 node(s)",
		"`srun --nodes=2 --ntasks-per-node=8 gotrain train --deepspeed ds_config.json`",
		"`gotrain launch --launcher slurm --num_nodes 2 --nproc 8 train --deepspeed ds_config.json`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}
	// One task on one node (srun --pty, an interactive step) may launch.
	t.Setenv("SLURM_STEP_NUM_TASKS", "1")
	t.Setenv("SLURM_STEP_NUM_NODES", "1")
	if _, _, err := run(t, "launch", "--nproc", "0", "train"); err == nil || strings.Contains(err.Error(), "srun") {
		t.Errorf("a one-task step: %v", err)
	}
}
