package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// seedCase is one testdata config with the run settings its seed document gives and the batch sizes
// DeepSpeed would compute for them on 4 ranks (micro × gas × world size, worked out from the document).
type seedCase struct {
	file            string
	strict          bool
	ov              Overrides
	micro, gas, tbs int
}

func seedCases() []seedCase {
	return []seedCase{
		// Seed 000: 8 per GPU, 4 accumulation steps, 4 GPUs: "128+ effective".
		{"000_ds_zero3_config.json", true, Overrides{}, 8, 4, 128},
		{"000_ds_zero2_config.json", true, Overrides{}, 8, 4, 128},
		{"000_ds_zero3_offload.json", true, Overrides{}, 8, 4, 128},
		// Seed 001: micro 1, gas 1; the typo needs lenient mode and the missing total_num_steps the run length
		// (MAX_STEPS=100 in its script).
		{"001_ds_config.json", false, Overrides{TotalSteps: Some(100)}, 1, 1, 4},
		// Seed 002: micro "auto" (Hugging Face default 8 without a flag), gas 16.
		{"002_ds_config_example.json", true, Overrides{}, 8, 16, 512},
		{"002_ds_config_example.json", true, Overrides{MicroBatch: Some(2)}, 2, 16, 128},
		{"002_generated_zero2_offload_bf16.json", true, Overrides{}, 8, 1, 32},
		// Seed 003: BATCH_SIZE=1, GRADIENT_ACCUM=2 → "Effective batch size = 4 × 1 × 2 = 8".
		{"003_deepspeed_zero2.json", true, Overrides{MicroBatch: Some(1), GradAccum: Some(2), Precision: "bf16"}, 1, 2, 8},
		{"003_deepspeed_zero3.json", true, Overrides{MicroBatch: Some(1), GradAccum: Some(2), Precision: "bf16", Hidden: 1024}, 1, 2, 8},
		// Seed 004: batch_size 2 per GPU, gradient_accumulation_steps 4.
		{"004_deepspeed_config.json", true, Overrides{MicroBatch: Some(2), GradAccum: Some(4), TotalSteps: Some(10000), Precision: "bf16"}, 2, 4, 32},
	}
}

func TestSeedConfigs(t *testing.T) {
	for _, sc := range seedCases() {
		t.Run(fmt.Sprintf("%s/%+v", sc.file, sc.ov.MicroBatch), func(t *testing.T) {
			ov := sc.ov
			ov.WorldSize = 4
			c, err := Load(filepath.Join("testdata", "seeds", sc.file), Options{Strict: sc.strict, Overrides: ov})
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Resolve(4)
			if err != nil {
				t.Fatal(err)
			}
			if b.MicroBatch != sc.micro || b.GradAccum != sc.gas || b.TrainBatchSize != sc.tbs {
				t.Errorf("batch = %+v, want micro %d gas %d train_batch_size %d", b, sc.micro, sc.gas, sc.tbs)
			}
			var out bytes.Buffer
			if err := Explain(&out, c, 4, 1024); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			if !lineHas(s, "train_batch_size", fmt.Sprint(sc.tbs)) || !lineHas(s, "tokens_per_step", fmt.Sprint(sc.tbs*1024)) {
				t.Errorf("explain output lacks the batch sizes:\n%s", s)
			}
		})
	}
}

// lineHas reports whether some line starts with key (after indentation) and has value as its first value.
func lineHas(out, key, value string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == key && f[2] == value {
			return true
		}
	}
	return false
}

func TestSeedSpecifics(t *testing.T) {
	load := func(name string, opts Options) (*Config, Errors) {
		t.Helper()
		c, err := Load(filepath.Join("testdata", "seeds", name), opts)
		if err == nil {
			return c, nil
		}
		es, ok := err.(Errors)
		if !ok {
			t.Fatalf("%s: %v", name, err)
		}
		return c, es
	}

	// Seed 001 keeps its typo: strict mode rejects it with the suggestion, lenient mode warns.
	_, es := load("001_ds_config.json", Options{Strict: true, Overrides: Overrides{TotalSteps: Some(100)}})
	e := errAt(es, "scheduler.params.cosine_min_ratio")
	if len(es) != 1 || e == nil || !strings.Contains(e.Msg, "did you mean cos_min_ratio?") || e.Line != 20 {
		t.Errorf("seed 001 strict: %v", es)
	}
	c, es := load("001_ds_config.json", Options{Overrides: Overrides{TotalSteps: Some(100)}})
	if es != nil {
		t.Fatalf("seed 001 lenient: %v", es)
	}
	if w := warnAt(c.Warnings, "scheduler.params.cosine_min_ratio"); w == nil || !strings.Contains(w.Msg, "cos_min_ratio") {
		t.Errorf("seed 001 lenient warnings: %v", c.Warnings)
	}
	if c.Scheduler.Params.CosMinRatio != 0.0001 || c.Scheduler.Params.TotalNumSteps != 100 {
		t.Errorf("seed 001: the misspelt key must not set cos_min_ratio (DeepSpeed default 1e-4): %+v", c.Scheduler.Params)
	}
	if o := c.Optimizer; o.Betas != [2]float64{0.9, 0.95} || o.WeightDecay != 0.1 || o.Eps != 1e-8 || !o.AdamWMode {
		t.Errorf("seed 001 optimizer: %+v", o)
	}
	// Without the run length, the missing total_num_steps is the run's: a warning that DeepSpeed would fail.
	c, es = load("001_ds_config.json", Options{})
	if errAt(es, "scheduler.params.total_num_steps") != nil || warnAt(c.Warnings, "scheduler.params.total_num_steps") == nil ||
		c.Scheduler.Params.TotalNumSteps != DefaultMaxSteps {
		t.Errorf("seed 001 without --max-steps: %v %v", es, c.Warnings)
	}

	// Seed 003 ZeRO-3: bucket sizes from the model width (Hugging Face: h², 0.9·h², 10·h).
	c, _ = load("003_deepspeed_zero3.json", Options{Strict: true, Overrides: Overrides{Hidden: 1024, Precision: "bf16"}})
	if z := c.ZeRO; z.ReduceBucketSize != 1048576 || z.Stage3PrefetchBucketSize != 943718 || z.Stage3ParamPersistenceThreshold != 10240 || !c.BF16.Enabled {
		t.Errorf("seed 003 zero3: %+v", z)
	}

	// Seed 004: stage 3 with both offloads and the aggressive 5e7 limits, cpu_checkpointing: all supported.
	c, _ = load("004_deepspeed_config.json", Options{Strict: true, Overrides: Overrides{TotalSteps: Some(10)}})
	z := c.ZeRO
	if z.Stage != 3 || z.OffloadOptimizer.Device != "cpu" || z.OffloadParam.Device != "cpu" || z.Stage3MaxLiveParameters != 50000000 ||
		z.Stage3MaxReuseDistance != 50000000 || !c.ActivationCheckpointing.Present || !c.ActivationCheckpointing.CPUCheckpointing {
		t.Errorf("seed 004: %+v %+v", z, c.ActivationCheckpointing)
	}
	if u := c.Unsupported(); len(u) != 0 {
		t.Errorf("seed 004 unsupported = %v", u)
	}
}
