package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/config"
)

func TestRewriteArgs(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		// DeepSpeed's boolean next to --deepspeed_config (seed 000), and
		// the launcher's --local_rank in both spellings.
		{"train --deepspeed --deepspeed_config ds.json --local_rank=3 --seq-len 16",
			"train --deepspeed_config ds.json --seq-len 16"},
		{"train --local-rank 1 --deepspeed", "train"},
		{"train --local_rank 0 --max-steps 5", "train --max-steps 5"},
		// Hugging Face's --deepspeed FILE (seed 002's srun line).
		{"train --config config.yaml --deepspeed config/ds_config.json", "train --config config.yaml --config config/ds_config.json"},
		{"train --deepspeed=ds.json", "train --config=ds.json"},
		{"train --deepspeed true --lr 1", "train --lr 1"},
		// The implied train command.
		{"--deepspeed --deepspeed_config ds.json", "train --deepspeed_config ds.json"},
		// Hugging Face's resume flag, with and without a directory (seed 001).
		{"train --resume_from_checkpoint checkpoints/ --lr 1", "train --resume checkpoints/ --lr 1"},
		{"train --resume_from_checkpoint --lr 1", "train --resume auto --lr 1"},
		{"train --resume_from_checkpoint", "train --resume auto"},
		{"train --resume_from_checkpoint=False", "train --resume never"},
		// Flags after positional arguments move in front of them; a flag's
		// value stays with it, a boolean takes none.
		{"config validate ds.json --nproc 4 --allow-unknown-keys", "config validate --nproc 4 --allow-unknown-keys ds.json"},
		{"config explain ds.json --nproc=4 --seq-len 8", "config explain --nproc=4 --seq-len 8 ds.json"},
		{"data prepare a.txt b.txt --output dir --quiet", "data prepare --output dir --quiet a.txt b.txt"},
		{"tokenize - --lines", "tokenize --lines -"},
		// Everything after -- and after launch's command name is left alone.
		{"slurm generate --nodes 2 -- --config x --lr 1", "slurm generate --nodes 2 -- --config x --lr 1"},
		{"launch --nproc 2 train --deepspeed --deepspeed_config x --local_rank=0", "launch --nproc 2 train --deepspeed --deepspeed_config x --local_rank=0"},
		// No command: unchanged.
		{"--help", "--help"},
		{"nosuchcommand x --y", "nosuchcommand x --y"},
	} {
		in := append([]string{"gotrain"}, strings.Fields(tc.in)...)
		want := append([]string{"gotrain"}, strings.Fields(tc.want)...)
		if got := normalizeArgs(in); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, got, want)
		}
	}
}

func TestPrecisionFlag(t *testing.T) {
	for _, tc := range []struct {
		bf16, fp16 bool
		mixed      string
		want       string
		err        bool
	}{
		{false, false, "", "", false},
		{true, false, "", "bf16", false},
		{false, true, "", "fp16", false},
		{false, false, "no", "fp32", false},
		{false, false, "BF16", "bf16", false},
		{true, false, "bf16", "bf16", false},
		{true, true, "", "", true},
		{true, false, "fp16", "", true},
		{false, false, "fp8", "", true},
	} {
		got, err := precisionFlag(tc.bf16, tc.fp16, tc.mixed)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("precisionFlag(%v, %v, %q) = %q, %v; want %q, error %v", tc.bf16, tc.fp16, tc.mixed, got, err, tc.want, tc.err)
		}
	}
}

// autoPrecisionConfig writes a config whose precision and Adam constants are
// "auto", as Hugging Face's example configs are.
func autoPrecisionConfig(t *testing.T, dir string) string {
	t.Helper()
	f := filepath.Join(dir, "ds_auto.json")
	os.WriteFile(f, []byte(`{
		"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
		"optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "betas": "auto", "eps": "auto", "weight_decay": 0.1}},
		"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
		"zero_optimization": {"stage": 1}
	}`), 0o644)
	return f
}

func TestAutoFP32Warning(t *testing.T) {
	dir := t.TempDir()
	f := autoPrecisionConfig(t, dir)
	load := func(prec string) *config.Config {
		c, err := config.Load(f, config.Options{Strict: true, Overrides: config.Overrides{Precision: prec}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if w := autoFP32Warning(load(""), 90); !strings.Contains(w, "sm_90") || !strings.Contains(w, "--bf16") {
		t.Errorf("auto → fp32 on sm_90: warning %q", w)
	}
	if w := autoFP32Warning(load(""), 75); w != "" {
		t.Errorf("sm_75 has no bf16, yet: %q", w)
	}
	if w := autoFP32Warning(load("fp32"), 90); w != "" {
		t.Errorf("--mixed_precision no was asked for, yet: %q", w)
	}
	if w := autoFP32Warning(load("bf16"), 90); w != "" {
		t.Errorf("bf16 run warned: %q", w)
	}
	if got := precisionLabel(load("bf16")); got != "bf16" {
		t.Errorf("precision label %q", got)
	}
}

// TestBF16FlagFillsAutoPrecision: the same "auto" config trains in fp32
// without a flag and in bf16 with --bf16 (or --mixed_precision bf16): the
// start-up line says which, and the losses differ, bf16 rounding the
// activations; --adam_beta1/--adam_epsilon fill the "auto" Adam constants
// and change the trajectory too.
func TestBF16FlagFillsAutoPrecision(t *testing.T) {
	fx := newCkFixture(t)
	cfg := autoPrecisionConfig(t, fx.dir)
	trainLosses := func(name string, extra ...string) ([]float64, string) {
		out := filepath.Join(fx.dir, name)
		args := append([]string{"--deepspeed", "--deepspeed_config", cfg, "--model", fx.model, "--data", fx.shard, "--seq-len", "16",
			"--max-steps", "4", "--output-dir", out, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu"}, extra...)
		stdout, stderr, err := run(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s\n%s", name, err, stdout, stderr)
		}
		return readLosses(t, filepath.Join(out, "metrics.jsonl")), stdout
	}
	fp32, out32 := trainLosses("fp32")
	bf16, out16 := trainLosses("bf16", "--bf16")
	mixed, _ := trainLosses("mixed", "--mixed_precision", "bf16")
	betas, _ := trainLosses("betas", "--adam_beta1", "0.5", "--adam_epsilon", "1e-3")
	if !strings.Contains(out32, "precision fp32") || !strings.Contains(out16, "precision bf16") {
		t.Errorf("start-up lines do not name the precision:\n%s\n%s", firstLine(out32), firstLine(out16))
	}
	if len(fp32) != 4 || len(bf16) != 4 || len(betas) != 4 {
		t.Fatalf("steps logged: %d, %d, %d", len(fp32), len(bf16), len(betas))
	}
	if reflect.DeepEqual(fp32, bf16) {
		t.Errorf("--bf16 did not change the losses: %v", fp32)
	}
	if !reflect.DeepEqual(bf16, mixed) {
		t.Errorf("--bf16 and --mixed_precision bf16 differ: %v vs %v", bf16, mixed)
	}
	if reflect.DeepEqual(fp32[1:], betas[1:]) {
		t.Errorf("--adam_beta1 0.5 --adam_epsilon 1e-3 did not change the losses after step 1: %v", fp32)
	}
	if _, _, err := run(t, "train", "--config", cfg, "--model", fx.model, "--data", fx.shard, "--seq-len", "16", "--bf16", "--fp16", "--device", "cpu"); err == nil ||
		!strings.Contains(err.Error(), "disagree") {
		t.Errorf("--bf16 --fp16: %v", err)
	}
}

// TestSeedCommandShapesTrainOnTwoRanks runs seed 000's shape, DeepSpeed's
// launcher with --num_gpus, --deepspeed --deepspeed_config and the
// --local_rank every rank gets from it, on 2 CPU ranks, and seed 002's HF
// shape (--deepspeed FILE) with flags after a positional argument in one
// process.
func TestSeedCommandShapesTrainOnTwoRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	cfg := stageConfig(t, dir, 3, 2)
	out := filepath.Join(dir, "ds")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"launch", "--num_gpus=2", "--master_port", "0", "train", "--deepspeed", "--deepspeed_config", cfg,
		"--local_rank=0", "--model", modelCfg, "--data", shard, "--seq-len", "16", "--max-steps", "3",
		"--output-dir", out, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off"}
	b, err := gotrainCmd(ctx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gotrain %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	if !strings.Contains(string(b), "2 rank(s), ZeRO stage 3") {
		t.Errorf("not 2 ranks at stage 3:\n%s", b)
	}
	if n := len(readLosses(t, filepath.Join(out, "metrics.jsonl"))); n != 3 {
		t.Errorf("%d steps logged, want 3", n)
	}

	hf := filepath.Join(dir, "hf")
	stdout, stderr, err := run(t, "--deepspeed", cfg, "--local-rank", "0", "--model", modelCfg, "--data", shard, "--seq-len", "16",
		"--max-steps", "2", "--output-dir", hf, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu")
	if err != nil {
		t.Fatalf("--deepspeed FILE: %v\n%s\n%s", err, stdout, stderr)
	}
	if n := len(readLosses(t, filepath.Join(hf, "metrics.jsonl"))); n != 2 {
		t.Errorf("%d steps logged, want 2", n)
	}
	// Flags after the FILE argument, as argparse users write them.
	if _, stderr, err := run(t, "config", "validate", cfg, "--nproc", "2", "--max-steps", strconv.Itoa(3)); err != nil {
		t.Errorf("config validate FILE --nproc 2: %v\n%s", err, stderr)
	}
}

// TestExplainShippedZeRO3WithAutos: `config explain configs/ds_zero3.json`
// with neither --nproc nor --max-steps explains, showing what only the run
// knows as filled at run time; with them, the numbers.
func TestExplainShippedZeRO3WithAutos(t *testing.T) {
	out, stderr, err := run(t, "config", "explain", "../../configs/ds_zero3.json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{
		"params.total_num_steps ................... auto → filled at run time from --max-steps (default 100)",
		"reduce_bucket_size ....................... auto → filled at run time from the model's width",
		"world_size ............................... auto → filled at run time from the number of ranks",
		"train_batch_size ......................... inferred at run time",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	out, _, err = run(t, "config", "explain", "../../configs/ds_zero3.json", "--nproc", "2", "--max-steps", "70")
	if err != nil || !strings.Contains(out, "params.total_num_steps ................... 70  (auto: total steps=70)") ||
		!strings.Contains(out, "train_batch_size ......................... 8") {
		t.Errorf("explain --nproc 2 --max-steps 70: %v\n%s", err, out)
	}
	if _, stderr, err := run(t, "config", "validate", "../../configs/ds_zero3.json"); err != nil {
		t.Errorf("validate without --max-steps: %v\n%s", err, stderr)
	}
}

// TestOneDefaultRunLength: every command with a run length defaults to the
// same one, the one validate and explain assume.
func TestOneDefaultRunLength(t *testing.T) {
	app := newApp(new(strings.Builder), new(strings.Builder))
	found := 0
	var walk func(path string, cmds []*cli.Command)
	walk = func(path string, cmds []*cli.Command) {
		for _, c := range cmds {
			if f, ok := lookupFlag(c, "max-steps").(*cli.IntFlag); ok {
				found++
				if f.Value != config.DefaultMaxSteps && !(f.Value == 0 && strings.Contains(f.DefaultText, strconv.Itoa(config.DefaultMaxSteps))) {
					t.Errorf("%s %s --max-steps defaults to %d (%q), not %d", path, c.Name, f.Value, f.DefaultText, config.DefaultMaxSteps)
				}
			}
			walk(path+" "+c.Name, c.Subcommands)
		}
	}
	walk("gotrain", app.Commands)
	if found < 4 { // train, estimate, config validate, config explain
		t.Errorf("only %d commands have --max-steps", found)
	}
}

// TestLaunchAccelerateConfigFile: `gotrain launch --config_file accelerate.yaml
// train ...` takes the world size from num_processes and trains with the
// DeepSpeed config the file maps to (here FSDP SHARD_GRAD_OP: ZeRO-2), which
// it writes into the run's output directory, leaving a file of the same
// name beside the YAML alone.
func TestLaunchAccelerateConfigFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	dir, modelCfg, shard := distFixture(t)
	yaml := filepath.Join(dir, "accelerate.yaml")
	os.WriteFile(yaml, []byte("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: SHARD_GRAD_OP\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\nmixed_precision: 'no'\nnum_machines: 1\nnum_processes: 2\n"), 0o644)
	users := filepath.Join(dir, "accelerate.deepspeed.json")
	const mine = `{"train_micro_batch_size_per_gpu": 1} // the user's own`
	os.WriteFile(users, []byte(mine), 0o644)
	out := filepath.Join(dir, "run")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"launch", "--config_file", yaml, "--master_port", "0", "train", "--model", modelCfg, "--data", shard,
		"--seq-len", "16", "--max-steps", "2", "--micro-batch-size", "2", "--output_dir", out, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off"}
	b, err := gotrainCmd(ctx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("gotrain %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	converted := filepath.Join(out, "accelerate.deepspeed.json")
	for _, want := range []string{"2 rank(s), ZeRO stage 2, precision fp32", "is an Accelerate config (distributed_type FSDP)", "ignored: fsdp_config.fsdp_auto_wrap_policy",
		"wrote " + converted} {
		if !strings.Contains(string(b), want) {
			t.Errorf("output lacks %q:\n%s", want, b)
		}
	}
	if got, err := os.ReadFile(converted); err != nil || !strings.HasPrefix(string(got), launchDeepSpeedMark) {
		t.Errorf("converted config in the output directory: %v\n%s", err, got)
	}
	if got, _ := os.ReadFile(users); string(got) != mine {
		t.Errorf("the file beside the YAML changed: %s", got)
	}
	if n := len(readLosses(t, filepath.Join(out, "metrics.jsonl"))); n != 2 {
		t.Errorf("%d steps logged", n)
	}
	// A second launch rewrites its own file; a file of that name gotrain
	// did not write is refused, and kept.
	os.WriteFile(converted, []byte(mine), 0o644)
	b, err = gotrainCmd(ctx, append(args, "--resume", "auto")...).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "gotrain did not write it") {
		t.Errorf("a user's file in the output directory: %v\n%s", err, b)
	}
	if got, _ := os.ReadFile(converted); string(got) != mine {
		t.Errorf("the user's file in the output directory changed: %s", got)
	}
}

func TestConfigImportAndValidateYAML(t *testing.T) {
	dir := t.TempDir()
	outFile := filepath.Join(dir, "ds.json")
	_, stderr, err := run(t, "config", "import", "../../config/testdata/import/003_accelerate_config_4gpu.yaml", "--output", outFile)
	if err != nil || !strings.Contains(stderr, "ignored: compute_environment") || !strings.Contains(stderr, "gotrain launch --nproc 4") {
		t.Fatalf("import: %v\n%s", err, stderr)
	}
	c, err := config.Load(outFile, config.Options{Strict: true, Overrides: config.Overrides{WorldSize: 4, MicroBatch: config.Some(1), GradAccum: config.Some(2)}})
	if err != nil || !c.BF16.Enabled || c.ZeRO.Stage != 2 {
		t.Fatalf("imported config: %v", err)
	}
	out, stderr, err := run(t, "config", "validate", "../../config/testdata/import/002_fsdp_config.json", "--nproc", "4")
	if err != nil || !strings.Contains(stderr, "is a PyTorch FSDP config (JSON)") || !strings.Contains(out, "OK") {
		t.Errorf("validate FSDP JSON: %v\n%s%s", err, out, stderr)
	}
	if _, _, err := run(t, "config", "import", "../../config/testdata/import/fsdp_hybrid.yaml"); err == nil || !strings.Contains(err.Error(), "HYBRID_SHARD") {
		t.Errorf("HYBRID_SHARD: %v", err)
	}
	if _, _, err := run(t, "launch", "--launcher", "openmpi", "train"); err == nil || !strings.Contains(err.Error(), "mpirun -np") {
		t.Errorf("--launcher openmpi: %v", err)
	}
	if _, _, err := run(t, "launch", "--launcher", "pdsh", "train"); err == nil || !strings.Contains(err.Error(), "--launcher ssh") {
		t.Errorf("--launcher pdsh: %v", err)
	}
}

// TestCheckpointCommandsTakeTheRunDir: checkpoint inspect and export accept a
// run's --output-dir as well as its checkpoints/, with the same result.
func TestCheckpointCommandsTakeTheRunDir(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 2)
	var tables []string
	for _, dir := range []string{out, filepath.Join(out, "checkpoints")} {
		stdout, stderr, err := run(t, "checkpoint", "inspect", dir)
		if err != nil || !strings.Contains(stdout, "global_step2") {
			t.Fatalf("inspect %s: %v\n%s%s", dir, err, stdout, stderr)
		}
		tables = append(tables, stdout)
		exp := filepath.Join(fx.dir, "export-"+filepath.Base(dir))
		if _, stderr, err := run(t, "checkpoint", "export", dir, "--out", exp); err != nil {
			t.Fatalf("export %s: %v\n%s", dir, err, stderr)
		}
		if _, err := os.Stat(filepath.Join(exp, "model.safetensors")); err != nil {
			t.Errorf("export %s: %v", dir, err)
		}
	}
	if tables[0] != tables[1] {
		t.Errorf("run dir and checkpoints dir inspect differently:\n%s\n%s", tables[0], tables[1])
	}
}
