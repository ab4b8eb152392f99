package main

import (
	"context"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// LoRA on one emulated GPU follows the CPU run step for step: a tiny Qwen3
// with adapters of rank 4 on every linear layer (A and B nonzero from the
// first step on: B starts at zero as PEFT's and moves at step 1), the
// frozen base at ZeRO-0 and ZeRO-3, GA 2 and clipping; the losses agree
// to fp32 rounding, the bound the other emulated-GPU tests use, and the
// adapters written at the end agree too; with lora_dropout 0.1 as well,
// since the GPU draws the CPU's masks.
func TestLoRAOnCUDAMatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on an emulated GPU")
	}
	for _, kv := range mockGPUEnv(t, 1) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir, _, shard := distFixture(t)
	mcfg, err := model.ByName(qwen3Fixture(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	const steps = 4
	lora := &trainer.LoRAOptions{Config: model.LoRA{R: 4, Alpha: 8, Target: []string{"all-linear"}}}
	train := func(be backend.Backend, stage int, out string) []float64 {
		t.Helper()
		text := `{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
			"optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.1}},
			"zero_optimization": {"stage": ` + strconv.Itoa(stage) + `, "stage3_param_persistence_threshold": 0}}`
		cfg, err := config.Parse("lora.json", []byte(text), config.Options{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		b, err := cfg.Resolve(1)
		if err != nil {
			t.Fatal(err)
		}
		_, err = trainer.Run(context.Background(), be, trainer.Options{Config: cfg, Batch: b, Model: mcfg, Seed: 1,
			Data: []string{shard}, SeqLen: 16, MaxSteps: steps, OutputDir: out, Resume: "never", LoRA: lora})
		if err != nil {
			t.Fatal(err)
		}
		l := readLosses(t, filepath.Join(out, "metrics.jsonl"))
		if len(l) != steps {
			t.Fatalf("%s: %d steps logged", out, len(l))
		}
		return l
	}
	cpuBE, _, err := newBackend(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := openGPU(0, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	// Without dropout, then with lora_dropout 0.1 (ZeRO-3 only), whose masks
	// the GPU kernel draws as the CPU does.
	for _, dropout := range []float64{0, 0.1} {
		lora.Config.Dropout = dropout
		stages := []int{0, 3}
		if dropout > 0 {
			stages = []int{3}
		}
		name := "p" + strconv.FormatFloat(dropout, 'g', -1, 64)
		ref := filepath.Join(dir, "cpu"+name)
		want := train(cpuBE, 0, ref)
		if want[steps-1] >= want[0] {
			t.Errorf("LoRA on the CPU did not lower the loss: %v", want)
		}
		alay, err := model.NewAdapterLayout(mcfg, lora.Config)
		if err != nil {
			t.Fatal(err)
		}
		wantA, err := model.LoadAdapter(ref, alay)
		if err != nil {
			t.Fatal(err)
		}
		for _, stage := range stages {
			out := filepath.Join(dir, "cuda"+strconv.Itoa(stage)+name)
			got := train(gpu.be, stage, out)
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-4*math.Abs(want[i]) {
					t.Errorf("lora_dropout %g, stage %d step %d: LoRA loss %.7f on the emulated GPU, %.7f on the CPU", dropout, stage, i+1, got[i], want[i])
				}
			}
			gotA, err := model.LoadAdapter(out, alay)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i, w := range wantA {
				worst = max(worst, math.Abs(float64(gotA[i])-float64(w)))
			}
			if worst > 1e-4 {
				t.Errorf("lora_dropout %g, stage %d: the GPU run's adapters differ from the CPU's by up to %.3g", dropout, stage, worst)
			}
			t.Logf("lora_dropout %g, stage %d: LoRA losses on the GPU %.6f … %.6f, CPU %.6f … %.6f; adapters within %.3g", dropout, stage, got[0], got[steps-1], want[0], want[steps-1], worst)
		}
	}
}
