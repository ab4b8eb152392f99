package trainer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
)

const (
	maskedFixture = "testdata/masked_steps.safetensors"
	maskedRows    = "testdata/masked_rows.jsonl"
	qwen3Case     = "../model/testdata/llama_tiny/qwen3_qknorm"
)

// TestMaskedRowsMatchPyTorch: the tiny Qwen3 trains on pre-tokenized
// {input_ids, labels} rows (some longer than T+1, some of one to three
// tokens, prompts at -100), prepared without a tokenizer into shards with
// loss-mask companions, and every step's loss, learning rate and gradient
// norm match testdata/make_masked_fixture.py's float64 PyTorch run of the
// loss over every unmasked target of the whole step — on one rank with
// gradient accumulation 2 and on two ranks (TCP, one micro-batch each).
// The script checks that a mean of per-micro-batch means differs from it
// by more than 1e-2, so the tolerance here tells the two apart.
func TestMaskedRowsMatchPyTorch(t *testing.T) {
	ref, err := model.OpenSafetensors(maskedFixture)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	want := map[string][]float32{}
	for _, k := range []string{"losses", "lrs", "grad_norms"} {
		if want[k], _, err = ref.ReadFloat32(k); err != nil {
			t.Fatal(err)
		}
	}
	seqLen, err := strconv.Atoi(ref.Metadata()["seq_len"])
	if err != nil {
		t.Fatal(err)
	}
	dsText := ref.Metadata()["deepspeed_config"]
	mcfg, err := model.LoadHFConfig(filepath.Join(qwen3Case, "config.json"))
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	sum, err := data.Prepare(context.Background(), data.PrepareOptions{Inputs: []string{maskedRows}, OutputDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows.Rows != 24 || len(sum.Train.Shards) != 1 {
		t.Fatalf("prepared %+v, want 24 rows in one shard", sum.Rows)
	}
	shard := sum.Train.Shards[0]
	if _, err := os.Stat(data.MaskPath(shard)); err != nil {
		t.Fatalf("no loss-mask companion: %v", err)
	}

	for _, world := range []int{1, 2} {
		t.Run(fmt.Sprintf("world%d", world), func(t *testing.T) {
			cfg, err := config.Parse("masked.json", []byte(dsText), config.Options{Strict: true})
			if err != nil {
				t.Fatal(err)
			}
			batch, err := cfg.Resolve(world)
			if err != nil {
				t.Fatal(err)
			}
			if want := 2 / world; batch.GradAccum != want {
				t.Fatalf("gradient accumulation %d on %d ranks, want %d", batch.GradAccum, world, want)
			}
			bes := make([]backend.Backend, world)
			for r := range bes {
				bes[r] = cpu.New(cpu.Options{Gemm: blas.Gonum{}})
			}
			comms := loopbackWorld(t, bes)
			out := filepath.Join(t.TempDir(), "out")
			errs := make([]error, world)
			done := make(chan int)
			for r := range world {
				go func() {
					_, errs[r] = Run(context.Background(), bes[r], Options{
						Config: cfg, Batch: batch, Model: mcfg, Comm: comms[r],
						InitFrom: filepath.Join(qwen3Case, "model.safetensors"),
						Data:     []string{filepath.Join(dir, "train_*.bin")}, SeqLen: seqLen,
						MaxSteps: len(want["losses"]), OutputDir: out,
					})
					done <- r
				}()
			}
			for range world {
				<-done
			}
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
			}
			steps := readMetrics(t, filepath.Join(out, "metrics.jsonl"))
			if len(steps) != len(want["losses"]) {
				t.Fatalf("%d step lines, want %d", len(steps), len(want["losses"]))
			}
			for i, s := range steps {
				check := func(what string, got float64, want float32, rtol float64) {
					if math.Abs(got-float64(want)) > rtol*math.Abs(float64(want)) {
						t.Errorf("step %d %s: got %.7g, PyTorch %.7g", i+1, what, got, want)
					}
				}
				check("loss", s["loss"], want["losses"][i], 1e-4)
				check("lr", s["lr"], want["lrs"][i], 1e-6)
				check("grad norm", s["grad_norm"], want["grad_norms"][i], 1e-4)
			}
		})
	}
}

// readMetrics returns metrics.jsonl's step lines (not eval lines).
func readMetrics(t *testing.T, path string) []map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatal(err)
		}
		if _, ok := raw["val_loss"]; ok {
			continue
		}
		m := map[string]float64{}
		for k, v := range raw {
			if x, ok := v.(float64); ok {
				m[k] = x
			}
		}
		out = append(out, m)
	}
	return out
}

// plainSource hides a source's Masked method: a BatchSource that yields
// ignored targets without saying so.
type plainSource struct{ BatchSource }

// TestStepMeanIgnoresMaskedTargetsOfAnySource: a step's loss and gradient
// are the mean over the unmasked targets it reads, counted from the
// batches themselves, so a source that yields -100 targets without
// declaring itself a MaskedSource trains exactly as the masked loader it
// wraps: the same gradient norms and final weights bit for bit, and the
// same losses up to where they are summed (the device's float32 running
// sum or the host's per-micro-batch means).
func TestStepMeanIgnoresMaskedTargetsOfAnySource(t *testing.T) {
	ref, err := model.OpenSafetensors(maskedFixture)
	if err != nil {
		t.Fatal(err)
	}
	seqLen, err := strconv.Atoi(ref.Metadata()["seq_len"])
	dsText := ref.Metadata()["deepspeed_config"]
	ref.Close()
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := model.LoadHFConfig(filepath.Join(qwen3Case, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := data.Prepare(context.Background(), data.PrepareOptions{Inputs: []string{maskedRows}, OutputDir: dir}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("masked.json", []byte(dsText), config.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cfg.Resolve(1)
	if err != nil {
		t.Fatal(err)
	}
	train := func(plain bool) ([]map[string]float64, []byte) {
		l, err := data.NewLoader(data.LoaderOptions{Shards: []string{filepath.Join(dir, "train_*.bin")},
			B: batch.MicroBatch, T: seqLen, WorldSize: 1, Vocab: mcfg.V})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if !l.Masked() {
			t.Fatal("the prepared rows have no loss mask")
		}
		var src BatchSource = l
		if plain {
			src = plainSource{l}
		}
		out := filepath.Join(t.TempDir(), "out")
		_, err = Run(context.Background(), cpu.New(cpu.Options{Gemm: blas.Gonum{}}), Options{
			Config: cfg, Batch: batch, Model: mcfg, InitFrom: filepath.Join(qwen3Case, "model.safetensors"),
			Batches: src, SeqLen: seqLen, MaxSteps: 3, OutputDir: out,
		})
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return readMetrics(t, filepath.Join(out, "metrics.jsonl")), w
	}
	masked, maskedW := train(false)
	plain, plainW := train(true)
	for i := range masked {
		m, p := masked[i], plain[i]
		if math.Abs(p["loss"]-m["loss"]) > 1e-6*m["loss"] {
			t.Errorf("step %d: loss %.9g from the plain source, %.9g from the masked one", i+1, p["loss"], m["loss"])
		}
		if p["grad_norm"] != m["grad_norm"] {
			t.Errorf("step %d: grad norm %.9g from the plain source, %.9g from the masked one", i+1, p["grad_norm"], m["grad_norm"])
		}
	}
	if !bytes.Equal(plainW, maskedW) {
		t.Error("the final weights differ")
	}
}
