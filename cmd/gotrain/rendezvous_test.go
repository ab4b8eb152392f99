package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// handRank is one rank started by hand, as torchrun or a user would: the
// rank variables in its environment and nothing from gotrain launch. env
// adds variables (GOTRAIN_JOB_SECRET, GOTRAIN_JOB_ID).
type handRank struct {
	cmd *exec.Cmd
	out bytes.Buffer
}

func startHandRank(t *testing.T, ctx context.Context, rank, port int, env []string, args ...string) *handRank {
	t.Helper()
	h := &handRank{cmd: gotrainCmd(ctx, args...)}
	var clean []string
	for _, kv := range h.cmd.Env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GOTRAIN_JOB_") || strings.HasPrefix(name, "SLURM_") || strings.HasPrefix(name, "OMPI_") || strings.HasPrefix(name, "PMI_") {
			continue
		}
		clean = append(clean, kv)
	}
	h.cmd.Env = append(clean, "RANK="+strconv.Itoa(rank), "WORLD_SIZE=2", "LOCAL_RANK="+strconv.Itoa(rank), "LOCAL_WORLD_SIZE=2",
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port))
	h.cmd.Env = append(h.cmd.Env, env...)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return h
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// autoLRConfig takes the learning rate from --lr.
func autoLRConfig(t *testing.T, dir string) string {
	t.Helper()
	f := filepath.Join(dir, "ds_auto_lr.json")
	os.WriteFile(f, []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
		"optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": 0.1}},
		"zero_optimization": {"stage": 1}}`), 0o644)
	return f
}

func trainArgs(cfg, modelCfg, shard, out, lr, seqLen, commTimeout string) []string {
	return []string{"train", "--config", cfg, "--model", modelCfg, "--data", shard, "--seq-len", seqLen, "--lr", lr,
		"--max-steps", "2", "--output-dir", out, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off",
		"--comm-timeout", commTimeout}
}

// TestRanksWithDifferentSettingsRefuseBeforeStep1: two ranks started with
// different learning rates and sequence lengths used to train together to
// exit 0 (the join compared only the version string). Now both refuse at
// the rendezvous, before step 1, naming each differing field with both
// values.
func TestRanksWithDifferentSettingsRefuseBeforeStep1(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	cfg := autoLRConfig(t, dir)
	out := filepath.Join(dir, "run")
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secret := []string{"GOTRAIN_JOB_SECRET=" + strings.Repeat("5e", 32)}
	r0 := startHandRank(t, ctx, 0, port, secret, trainArgs(cfg, modelCfg, shard, out, "0.001", "16", "20s")...)
	r1 := startHandRank(t, ctx, 1, port, secret, trainArgs(cfg, modelCfg, shard, out, "0.002", "8", "20s")...)
	for r, h := range []*handRank{r0, r1} {
		err := h.cmd.Wait()
		if err == nil {
			t.Errorf("rank %d exited 0:\n%s", r, h.out.String())
			continue
		}
		msg := h.out.String()
		for _, want := range []string{
			"rendezvous: rank 1 disagrees with rank 0 on ",
			"config.optimizer.params.lr: 0.001 (rank 0) ≠ 0.002 (rank 1)",
			"seq_len: 16 ≠ 8",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("rank %d does not say %q:\n%s", r, want, msg)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "metrics.jsonl")); err == nil && len(b) > 0 {
		t.Errorf("a step ran before the refusal:\n%s", b)
	}
	t.Logf("rank 1 said:\n%s", lastLines(r1.out.String(), 2))
}

// TestDerivedSecretRefusalNamesLikelyCause: without GOTRAIN_JOB_SECRET the
// ranks derive the secret from MASTER_PORT and their settings, so ranks
// with different settings are refused at the handshake, before fields are
// compared; the refusal says that different settings are the likely cause
// and how to see which, rank 0 warns that the secret is guessable, says at
// once which rank it refused and why, and fails naming it well before the
// rendezvous timeout.
func TestDerivedSecretRefusalNamesLikelyCause(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	cfg := autoLRConfig(t, dir)
	out := filepath.Join(dir, "run")
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r0 := startHandRank(t, ctx, 0, port, nil, trainArgs(cfg, modelCfg, shard, out, "0.001", "16", "3s")...)
	r1 := startHandRank(t, ctx, 1, port, nil, trainArgs(cfg, modelCfg, shard, out, "0.002", "16", "3s")...)
	if err := r1.cmd.Wait(); err == nil {
		t.Fatalf("rank 1 exited 0:\n%s", r1.out.String())
	}
	if !strings.Contains(r1.out.String(), "refused this rank: its job secret differs from rank 0's; this rank's secret was derived from MASTER_PORT and the run's settings, so the likely cause is that this rank was started with different settings than rank 0") ||
		!strings.Contains(r1.out.String(), "give every rank the same GOTRAIN_JOB_SECRET") {
		t.Errorf("rank 1:\n%s", r1.out.String())
	}
	if err := r0.cmd.Wait(); err == nil {
		t.Fatalf("rank 0 exited 0:\n%s", r0.out.String())
	}
	for _, want := range []string{
		fmt.Sprintf("warning: no GOTRAIN_JOB_SECRET: the job secret was derived from MASTER_PORT=%d", port),
		"rendezvous: refused rank 1 connecting from 127.0.0.1:",
		"when the secret is derived from SLURM_JOB_ID or MASTER_PORT and the run's settings, it runs with other settings",
		"rank 1 cannot join: the store refused it",
	} {
		if !strings.Contains(r0.out.String(), want) {
			t.Errorf("rank 0 does not say %q:\n%s", want, r0.out.String())
		}
	}
}

// TestJobsSharingAPortStayApart: a rank of job B that reaches job A's
// store (two jobs started on one port) used to join it, so job A's own
// rank 1 was turned away and job B's rank trained with job A's rank 0. Now
// it is refused with both job ids and job A trains.
func TestJobsSharingAPortStayApart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	cfg := autoLRConfig(t, dir)
	port := freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobA := []string{"GOTRAIN_JOB_SECRET=" + strings.Repeat("a1", 32), "GOTRAIN_JOB_ID=job-A"}
	jobB := []string{"GOTRAIN_JOB_SECRET=" + strings.Repeat("b2", 32), "GOTRAIN_JOB_ID=job-B"}
	outA := filepath.Join(dir, "a")
	a0 := startHandRank(t, ctx, 0, port, jobA, trainArgs(cfg, modelCfg, shard, outA, "0.001", "16", "20s")...)
	b1 := startHandRank(t, ctx, 1, port, jobB, trainArgs(cfg, modelCfg, shard, filepath.Join(dir, "b"), "0.001", "16", "20s")...)
	if err := b1.cmd.Wait(); err == nil {
		t.Fatalf("job B's rank 1 exited 0:\n%s", b1.out.String())
	}
	if want := `serves job "job-A" but this rank belongs to job "job-B": another job is using MASTER_PORT`; !strings.Contains(b1.out.String(), want) {
		t.Errorf("job B's rank 1 does not say %q:\n%s", want, b1.out.String())
	}
	a1 := startHandRank(t, ctx, 1, port, jobA, trainArgs(cfg, modelCfg, shard, outA, "0.001", "16", "20s")...)
	for r, h := range []*handRank{a0, a1} {
		if err := h.cmd.Wait(); err != nil {
			t.Fatalf("job A's rank %d: %v\n%s", r, err, h.out.String())
		}
	}
	if got := readLosses(t, filepath.Join(outA, "metrics.jsonl")); len(got) != 2 {
		t.Fatalf("job A logged %d steps, want 2", len(got))
	}
	if !strings.Contains(a0.out.String(), "info: job secret from GOTRAIN_JOB_SECRET; job id job-A") {
		t.Errorf("rank 0 does not say where the secret came from:\n%s", a0.out.String())
	}
}
