package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLaunchNumProcesses: Accelerate's --num_processes counts the ranks of
// every machine; with --num_nodes it must divide, and must agree with --nproc.
func TestLaunchNumProcesses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"launch", "--num_processes", "3", "--num_machines", "2", "train"}, "positive multiple of the 2 machine(s)"},
		{[]string{"launch", "--num_processes", "4", "--nproc", "3", "train"}, "--nproc says 3"},
	} {
		if _, _, err := run(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	// The working case starts ranks: TestLaunchSaysHowToResume launches
	// with --num_processes 2.
}

// TestLaunchSaysHowToResume: when a rank of a training job is killed after
// checkpoints were saved, the launcher prints the command line that
// continues the job: the same launch and train flags with --resume auto.
func TestLaunchSaysHowToResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	out := filepath.Join(dir, "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"launch", "--num_processes", "2", "--master_port", "0", "train", "--config", stageConfig(t, dir, 1, 2),
		"--model", modelCfg, "--data", shard, "--seq-len", "16", "--max-steps", "100000", "--output-dir", out,
		"--save-every", "1", "--resume", "never", "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off"}
	cmd := gotrainCmd(ctx, args...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(out, "checkpoints", "latest")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no checkpoint:\n%s", output.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ranks := childRanks(t, cmd.Process.Pid)
	if len(ranks) != 2 {
		cmd.Process.Kill()
		t.Fatalf("rank processes %v", ranks)
	}
	if err := syscall.Kill(ranks[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	text := output.String()
	if !strings.Contains(text, "2 rank(s)") {
		t.Errorf("--num_processes 2 did not start 2 ranks:\n%s", text)
	}
	i := strings.Index(text, "continue the job with:\n  ")
	if i < 0 {
		t.Fatalf("no resume advice:\n%s", text)
	}
	t.Logf("launcher said:\n%s", lastLines(text, 4))
	line := strings.SplitN(text[i+len("continue the job with:\n  "):], "\n", 2)[0]
	wantArgs := []string{os.Args[0]}
	for i := 0; i < len(args); i++ {
		if args[i] == "--resume" {
			i++
			continue
		}
		wantArgs = append(wantArgs, args[i])
	}
	wantArgs = append(wantArgs, "--resume", "auto")
	if got := strings.Fields(line); !reflect.DeepEqual(got, wantArgs) {
		t.Errorf("advice\n %q\nwant\n %q", got, wantArgs)
	}
}

func TestResumeArgs(t *testing.T) {
	train := findCommand(commands(), "train")
	for _, tc := range []struct{ in, want string }{
		{"--config x --resume never --overwrite --lr 1", "--config x --lr 1 --resume auto"},
		{"--resume_from_checkpoint --max-steps 5", "--max-steps 5 --resume auto"},
		{"--resume=out/checkpoints/global_step2 --bf16 --output_dir o", "--bf16 --output_dir o --resume auto"},
		{"--overwrite true --seq-len 16 --resume_from_checkpoint o/checkpoints", "--seq-len 16 --resume auto"},
		{"--data a -- x", "--data a --resume auto -- x"},
	} {
		if got := strings.Join(resumeArgs(train, strings.Fields(tc.in)), " "); got != tc.want {
			t.Errorf("resumeArgs(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestRankFlagValue: the launcher reads the ranks' output directory under
// any of its names, skipping other flags' values, and falls back to the
// default.
func TestRankFlagValue(t *testing.T) {
	train := findCommand(commands(), "train")
	for in, want := range map[string]string{
		"--output_dir runs/a --lr 1":              "runs/a",
		"--config --x --output-dir=runs/b":        "runs/b",
		"--data out/x --seed 3":                   "out",
		"--bf16 --output-dir c -- --output-dir d": "c",
	} {
		if got := rankFlagValue(train, strings.Fields(in), "output-dir"); got != want {
			t.Errorf("rankFlagValue(%s) = %q, want %q", in, got, want)
		}
	}
}
