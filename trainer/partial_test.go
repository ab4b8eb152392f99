package trainer_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// partialRunOptions is a small GPT-2 run writing to dir/out, saving every 2
// steps: its state files are about 150 KiB each.
func partialRunOptions(t *testing.T, dir string, steps int) trainer.Options {
	t.Helper()
	mcfg := model.GPT2(model.Config{MaxT: 16, V: 64, Vp: model.PadVocab(64), L: 2, NH: 2, C: 32})
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, markovTokens(20*2*16+1, 64, 2)); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("ds.json", []byte(`{"train_micro_batch_size_per_gpu": 2,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}`), config.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := cfg.Resolve(1)
	return trainer.Options{Config: cfg, Batch: batch, Model: mcfg, Seed: 1, Data: []string{shard}, SeqLen: 16,
		MaxSteps: steps, OutputDir: filepath.Join(dir, "out"), SaveEvery: 2}
}

// TestRunSweepsPartialCheckpointsAtStart: a save killed mid-write (or
// failed on a full disk) left ".global_step4.tmp" holding its space, so a
// requeued job hit ENOSPC again, and nothing named the directory. A run
// that takes the output lock removes it and says how much it freed.
func TestRunSweepsPartialCheckpointsAtStart(t *testing.T) {
	dir := t.TempDir()
	o := partialRunOptions(t, dir, 2)
	orphan := filepath.Join(o.OutputDir, "checkpoints", ".global_step4.tmp")
	if err := os.MkdirAll(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan, "params.safetensors"), bytes.Repeat([]byte{1}, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	o.Log = &log
	if _, err := trainer.Run(context.Background(), cpu.New(cpu.Options{Gemm: blas.Gonum{}}), o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s survived the next run's start (%v)", orphan, err)
	}
	if !strings.Contains(log.String(), "removed "+orphan) || !strings.Contains(log.String(), "3.0 MiB freed") {
		t.Errorf("the log does not name the removed %s and the 3.0 MiB it freed:\n%s", orphan, log.String())
	}
}

// limitAtStep sets RLIMIT_FSIZE once step `at` is observed: the save that
// follows fails to lay out its files (EFBIG, as ENOSPC would).
type limitAtStep struct {
	t     *testing.T
	at    int
	bytes uint64
}

func (l limitAtStep) ObserveStep(rec metrics.StepRecord, _ backend.MemoryStats, _ metrics.CommCounters) {
	if rec.Step != l.at {
		return
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		l.t.Error(err)
		return
	}
	lim := old
	lim.Cur = l.bytes
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		l.t.Error(err)
		return
	}
	l.t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old) })
}

// TestFailedSaveLeavesNoPartialTag: a save that fails part-way through
// writing its files ends the run with the write error and leaves no
// ".global_step2.tmp" behind.
func TestFailedSaveLeavesNoPartialTag(t *testing.T) {
	dir := t.TempDir()
	o := partialRunOptions(t, dir, 4)
	o.Log = &bytes.Buffer{}
	o.Observer = limitAtStep{t: t, at: 2, bytes: 16 << 10}
	_, err := trainer.Run(context.Background(), cpu.New(cpu.Options{Gemm: blas.Gonum{}}), o)
	if !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("Run with saves over the file size limit: %v, want the write error", err)
	}
	tmp := filepath.Join(o.OutputDir, "checkpoints", ".global_step2.tmp")
	if _, serr := os.Lstat(tmp); !errors.Is(serr, os.ErrNotExist) {
		t.Errorf("%s left behind by the failed save (%v)", tmp, serr)
	}
	if !strings.Contains(err.Error(), tmp+" was removed") {
		t.Errorf("error %q does not say the partial tag was removed", err)
	}
}
