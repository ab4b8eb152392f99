package trainer_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
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

// cancelAt cancels the run's context when step `at` is observed, as a
// SIGTERM arriving during that step would.
type cancelAt struct {
	at     int
	cancel context.CancelFunc
}

func (c cancelAt) ObserveStep(rec metrics.StepRecord, _ backend.MemoryStats, _ metrics.CommCounters) {
	if rec.Step == c.at {
		c.cancel()
	}
}

// TestSignalAfterSaveDoesNotSaveAgain: a stop requested during a step that
// ends with a scheduled save used to save that step a second time (through
// a move-aside/rename pair that a kill could split). The ranks learn of a
// stop with the next step's loss, finish that step and save it once; no tag
// is saved twice.
func TestSignalAfterSaveDoesNotSaveAgain(t *testing.T) {
	mcfg := model.GPT2(model.Config{MaxT: 16, V: 64, Vp: model.PadVocab(64), L: 1, NH: 2, C: 16})
	dir := t.TempDir()
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, markovTokens(40*2*16+1, 64, 2)); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("ds.json", []byte(`{"train_micro_batch_size_per_gpu": 2,
		"optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}`), config.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	batch, _ := cfg.Resolve(1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := filepath.Join(dir, "out")
	var log bytes.Buffer
	_, err = trainer.Run(ctx, cpu.New(cpu.Options{Gemm: blas.Gonum{}}), trainer.Options{
		Config: cfg, Batch: batch, Model: mcfg, Seed: 1, Data: []string{shard}, SeqLen: 16, MaxSteps: 30,
		OutputDir: out, SaveEvery: 2, Log: &log, Observer: cancelAt{at: 4, cancel: cancel},
	})
	var stopped *trainer.StoppedError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &stopped) || stopped.Step != 5 || stopped.Checkpoint != "global_step5" {
		t.Fatalf("Run after a cancel at the end of step 4: %v, want a stop after saving step 5", err)
	}
	for _, tag := range []string{"global_step4", "global_step5"} {
		line := "saved checkpoint " + filepath.Join(out, "checkpoints", tag) + " "
		if n := strings.Count(log.String(), line); n != 1 {
			t.Errorf("%s saved %d times, want once:\n%s", tag, n, log.String())
		}
	}
	if strings.Contains(log.String(), "global_step6") {
		t.Errorf("step 6 ran after the stop:\n%s", log.String())
	}
}
