package trainer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

const fixtureDir = "../model/testdata/pytorch_tiny"

// TestTrainingMatchesPyTorch runs the 10 AdamW steps of the PyTorch fixture
// (model/testdata/make_fixtures.py: gradient accumulation 2, clipping at 1.0,
// WarmupLR with DeepSpeed's step timing, decoupled weight decay on matrices
// only) and compares every step's loss, learning rate and gradient norm.
func TestTrainingMatchesPyTorch(t *testing.T) {
	ref, err := model.OpenSafetensors(filepath.Join(fixtureDir, "training_steps.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	tokens, _, err := ref.ReadInt32("tokens")
	if err != nil {
		t.Fatal(err)
	}
	wantLoss, _, err := ref.ReadFloat32("losses")
	if err != nil {
		t.Fatal(err)
	}
	wantLR, _, err := ref.ReadFloat32("lrs")
	if err != nil {
		t.Fatal(err)
	}
	wantNorm, _, err := ref.ReadFloat32("grad_norms")
	if err != nil {
		t.Fatal(err)
	}
	seqLen, err := strconv.Atoi(ref.Metadata()["seq_len"])
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("training_steps.safetensors:deepspeed_config", []byte(ref.Metadata()["deepspeed_config"]), config.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cfg.Resolve(1)
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := model.LoadHFConfig(filepath.Join(fixtureDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, tokens); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}})
	res, err := trainer.Run(context.Background(), be, trainer.Options{
		Config: cfg, Batch: batch, Model: mcfg,
		InitFrom: filepath.Join(fixtureDir, "model.safetensors"),
		Data:     []string{shard}, SeqLen: seqLen, MaxSteps: len(wantLoss), OutputDir: out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != len(wantLoss) {
		t.Fatalf("ran %d steps, want %d", res.Steps, len(wantLoss))
	}

	steps := readSteps(t, filepath.Join(out, "metrics.jsonl"))
	if len(steps) != len(wantLoss) {
		t.Fatalf("metrics.jsonl has %d step lines, want %d", len(steps), len(wantLoss))
	}
	for i, s := range steps {
		check := func(what string, got, want float64, rtol float64) {
			if math.Abs(got-want) > 1e-6+rtol*math.Abs(want) {
				t.Errorf("step %d %s: got %.7g, PyTorch %.7g (rel %.2e)", i+1, what, got, want, math.Abs(got-want)/math.Abs(want))
			}
		}
		check("loss", s.Loss, float64(wantLoss[i]), 1e-4)
		check("lr", s.LR, float64(wantLR[i]), 1e-6)
		check("grad norm", s.GradNorm, float64(wantNorm[i]), 1e-4)
	}
}

type stepLine struct {
	Step     int      `json:"step"`
	Loss     float64  `json:"loss"`
	LR       float64  `json:"lr"`
	GradNorm float64  `json:"grad_norm"`
	ValLoss  *float64 `json:"val_loss"`
}

func readSteps(t *testing.T, path string) []stepLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []stepLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s stepLine
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if s.ValLoss == nil {
			out = append(out, s)
		}
	}
	return out
}
