package trainer_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// TestLoRARunWritesPEFTAdapter trains LoRA adapters (started from a PEFT
// directory) on the frozen llama_gqa fixture for two steps on two ranks at
// ZeRO-3 through trainer.Run, and checks the output directory: a PEFT
// adapter whose names and shapes are the input's, whose values moved, and
// whose config reads back; no full model is written.
func TestLoRARunWritesPEFTAdapter(t *testing.T) {
	f := loadFamilyFixture(t, "llama_gqa")
	in := filepath.Join("..", "model", "testdata", "lora", "llama_gqa")
	l, err := model.LoadAdapterConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	alay, err := model.NewAdapterLayout(f.model, l)
	if err != nil {
		t.Fatal(err)
	}
	start, err := model.LoadAdapter(in, alay)
	if err != nil {
		t.Fatal(err)
	}
	stage3 := func(c map[string]any) { c["zero_optimization"] = map[string]any{"stage": 3} }
	out := f.runIn(t, t.TempDir(), 2, 2, stage3, func(o *trainer.Options) {
		o.LoRA = &trainer.LoRAOptions{Config: l, InitAdapter: in, BaseName: f.dir}
	})
	got, err := model.LoadAdapter(out, alay) // refuses other names or shapes
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(got, start) {
		t.Error("the saved adapter equals the initial one: nothing was trained")
	}
	back, err := model.LoadAdapterConfig(out)
	if err != nil || back.R != l.R || back.Alpha != l.Alpha || back.RSLoRA != l.RSLoRA {
		t.Errorf("saved adapter_config.json reads back as %+v (%v), want %+v", back, err, l)
	}
	if _, err := model.OpenSafetensors(filepath.Join(out, "model.safetensors")); err == nil {
		t.Error("a LoRA run wrote the full model")
	}
}

// TestLoRAFP32AdaptersFile: a bf16 LoRA run on 2 ranks at ZeRO-2 writes its
// adapter as PEFT does on a 16-bit base, in the adapters' own dtype: BF16
// tensors by default (the run's precision, as DeepSpeed casts the module),
// F32 tensors with FP32 (--lora-fp32), holding values no bf16 number has.
func TestLoRAFP32AdaptersFile(t *testing.T) {
	f, in, l, alay := loraFixture(t)
	bf16 := func(c map[string]any) {
		c["zero_optimization"] = map[string]any{"stage": 2}
		c["bf16"] = map[string]any{"enabled": true}
	}
	for _, fp32 := range []bool{false, true} {
		out := f.runIn(t, t.TempDir(), 2, 2, bf16, func(o *trainer.Options) {
			o.LoRA = &trainer.LoRAOptions{Config: l, InitAdapter: in, BaseName: f.dir, FP32: fp32}
		})
		st, err := model.OpenSafetensors(filepath.Join(out, model.AdapterWeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "BF16", true: "F32"}[fp32]
		for _, h := range st.Tensors() {
			if h.DType != want {
				t.Errorf("fp32 %v: %s is %s, want %s", fp32, h.Name, h.DType, want)
			}
		}
		st.Close()
		got, err := model.LoadAdapter(out, alay)
		if err != nil {
			t.Fatal(err)
		}
		wide := 0
		for _, v := range got {
			if backend.F32FromBF16(backend.BF16FromF32(v)) != v {
				wide++
			}
		}
		if fp32 && wide < len(got)/2 {
			t.Errorf("fp32 adapters: only %d of %d saved values are not bf16 numbers", wide, len(got))
		}
	}
}

// loraFixture is the llama_gqa training fixture with the committed PEFT
// adapter (A and B nonzero) as the LoRA run's start.
func loraFixture(t *testing.T) (familyFixture, string, model.LoRA, *model.AdapterLayout) {
	t.Helper()
	f := loadFamilyFixture(t, "llama_gqa")
	in := filepath.Join("..", "model", "testdata", "lora", "llama_gqa")
	l, err := model.LoadAdapterConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	alay, err := model.NewAdapterLayout(f.model, l)
	if err != nil {
		t.Fatal(err)
	}
	return f, in, l, alay
}

// readTagState is every state kind of a checkpoint tag.
func readTagState(t *testing.T, out, tag string, n int) map[checkpoint.Kind][]float32 {
	t.Helper()
	ck, err := checkpoint.Open(checkpoint.Dir(out), tag)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if err := ck.Verify(); err != nil {
		t.Fatal(err)
	}
	if ck.Meta().LoRA == nil {
		t.Errorf("tag %s records no LoRA configuration", tag)
	}
	st := map[checkpoint.Kind][]float32{}
	for _, k := range checkpoint.AllKinds() {
		if st[k], err = ck.ReadRange(k, 0, n); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// TestLoRAResumeIsExact: a LoRA run of six steps, and one of three steps
// resumed from its checkpoint to six, end with bit-identical adapters,
// fp32 master weights and AdamW moments, and log the same losses: the
// LoRA tag restores the adapters' optimizer state exactly (and the frozen
// base is read again from --init-from). With lora_dropout too: the masks
// follow the step, micro-batch and rank, so the resumed steps draw the
// straight run's.
func TestLoRAResumeIsExact(t *testing.T) {
	f, in, l0, alay := loraFixture(t)
	firstLoss := map[float64]float64{}
	for _, dropout := range []float64{0, 0.1} {
		t.Run(fmt.Sprintf("lora_dropout=%g", dropout), func(t *testing.T) {
			l := l0
			l.Dropout = dropout
			lora := func(o *trainer.Options) {
				o.LoRA = &trainer.LoRAOptions{Config: l, InitAdapter: in, BaseName: f.dir}
			}
			straight := f.runIn(t, t.TempDir(), 1, 6, nil, lora)
			dir := t.TempDir()
			f.runIn(t, dir, 1, 3, nil, lora)
			resumed := f.runIn(t, dir, 1, 6, nil, func(o *trainer.Options) { lora(o); o.Resume = "auto" })

			want, got := readTagState(t, straight, "global_step6", alay.NumParams()), readTagState(t, resumed, "global_step6", alay.NumParams())
			for _, k := range checkpoint.AllKinds() {
				if i := firstBitDiff(want[k], got[k]); i >= 0 {
					t.Errorf("%s after the resume differs at %d: %g, straight run %g", k, i, got[k][i], want[k][i])
				}
			}
			a, err := model.LoadAdapter(straight, alay)
			if err != nil {
				t.Fatal(err)
			}
			b, err := model.LoadAdapter(resumed, alay)
			if err != nil {
				t.Fatal(err)
			}
			if i := firstBitDiff(a, b); i >= 0 {
				t.Errorf("the resumed run's adapter file differs at %d: %g, straight run %g", i, b[i], a[i])
			}
			ws, rs := readSteps(t, filepath.Join(straight, "metrics.jsonl")), readSteps(t, filepath.Join(resumed, "metrics.jsonl"))
			if len(ws) != 6 || len(rs) != 6 {
				t.Fatalf("metrics.jsonl has %d and %d step lines, want 6", len(ws), len(rs))
			}
			for i := range ws {
				if ws[i].Loss != rs[i].Loss || ws[i].GradNorm != rs[i].GradNorm {
					t.Errorf("step %d: resumed loss %v grad norm %v, straight %v %v", i+1, rs[i].Loss, rs[i].GradNorm, ws[i].Loss, ws[i].GradNorm)
				}
			}
			firstLoss[dropout] = ws[0].Loss
		})
	}
	if firstLoss[0] == firstLoss[0.1] {
		t.Errorf("step 1's loss is %v with and without lora_dropout: the dropout did not reach the training pass", firstLoss[0])
	}
}

// TestLoRAResumeReshards: three LoRA steps on two ranks at ZeRO-3
// (gradient accumulation 1), resumed on one rank at ZeRO-1 with gradient
// accumulation 2 (the same global batch) to six, track the straight
// one-rank run: the adapters' state reshards across world size and stage.
func TestLoRAResumeReshards(t *testing.T) {
	f, in, l, alay := loraFixture(t)
	lora := func(o *trainer.Options) {
		o.LoRA = &trainer.LoRAOptions{Config: l, InitAdapter: in, BaseName: f.dir}
	}
	straight := f.runIn(t, t.TempDir(), 1, 6, nil, lora)
	dir := t.TempDir()
	f.runIn(t, dir, 2, 3, func(m map[string]any) {
		m["gradient_accumulation_steps"] = 1
		m["zero_optimization"] = map[string]any{"stage": 3, "stage3_param_persistence_threshold": 0}
	}, lora)
	resumed := f.runIn(t, dir, 1, 6, func(m map[string]any) {
		m["zero_optimization"] = map[string]any{"stage": 1}
	}, func(o *trainer.Options) { lora(o); o.Resume, o.AllowConfigChange = "auto", true })
	want, got := readTagState(t, straight, "global_step6", alay.NumParams()), readTagState(t, resumed, "global_step6", alay.NumParams())
	worst := 0.0
	for i, w := range want[checkpoint.Params] {
		worst = max(worst, math.Abs(float64(got[checkpoint.Params][i])-float64(w)))
	}
	if worst > 1e-5 {
		t.Errorf("resharded resume: adapters differ from the straight run's by up to %.3g", worst)
	}
	t.Logf("resharded resume: largest adapter difference %.3g", worst)
}

// TestLoRAResumeRefusesMismatch: a full run cannot resume a LoRA tag, nor a
// LoRA run of another rank, and a changed lora_alpha needs
// AllowConfigChange.
func TestLoRAResumeRefusesMismatch(t *testing.T) {
	f, in, l, _ := loraFixture(t)
	dir := t.TempDir()
	f.runIn(t, dir, 1, 1, nil, func(o *trainer.Options) {
		o.LoRA = &trainer.LoRAOptions{Config: l, InitAdapter: in, BaseName: f.dir}
	})
	other := l
	other.R = l.R + 1
	alpha := l
	alpha.Alpha = l.Alpha * 2
	for name, tc := range map[string]struct {
		lora *trainer.LoRAOptions
		want string
	}{
		"full run":      {nil, "holds LoRA adapters"},
		"another rank":  {&trainer.LoRAOptions{Config: other}, "pass the checkpoint's LoRA settings"},
		"another alpha": {&trainer.LoRAOptions{Config: alpha}, "--allow-config-change"},
	} {
		t.Run(name, func(t *testing.T) {
			err := f.tryRunIn(t, dir, 1, 2, func(o *trainer.Options) { o.LoRA, o.Resume = tc.lora, "auto" })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("resume: got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// firstBitDiff is the first index where a and b differ bitwise (-1: none;
// 0 when their lengths differ).
func firstBitDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// tryRunIn is runIn on one rank that returns the run's error.
func (f familyFixture) tryRunIn(t *testing.T, dir string, world, steps int, tweak func(*trainer.Options)) error {
	t.Helper()
	cfg, batch := f.config(t, world, nil)
	shard := filepath.Join(dir, "train_000000.bin")
	o := trainer.Options{
		Config: cfg, Batch: batch, Model: f.model, InitFrom: f.dir,
		Data: []string{shard}, SeqLen: f.seqLen, MaxSteps: steps, OutputDir: filepath.Join(dir, "out"),
	}
	tweak(&o)
	_, err := trainer.Run(context.Background(), cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1}), o)
	return err
}
