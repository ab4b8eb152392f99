package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// autoRunConfig writes a config whose batch, precision and clipping are
// "auto" and that has neither an optimizer nor a scheduler block, as the
// Hugging Face examples ship them: the flags decide the run.
func autoRunConfig(t *testing.T, dir string) string {
	t.Helper()
	f := filepath.Join(dir, "ds_hf.json")
	if err := os.WriteFile(f, []byte(`{
		"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
		"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 1}
	}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestBoolFlagsTakeAValue: a boolean flag followed by a truth word, or
// given one after "=", takes it as Hugging Face's parser does; `--bf16 false`
// trains in fp32, not bf16 with a stray word dropped.
func TestBoolFlagsTakeAValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"train --bf16 false --shuffle True --pack=no --lr 1", "train --bf16=false --shuffle=true --pack=false --lr 1"},
		{"train --bf16 --lr 1", "train --bf16 --lr 1"},
		{"train --gradient_checkpointing 1 --fp16=YES", "train --gradient_checkpointing=true --fp16=true"},
		// A word that is no truth value stays a positional argument.
		{"train --bf16 extra", "train --bf16 extra"},
	} {
		in := append([]string{"gotrain"}, strings.Fields(tc.in)...)
		want := append([]string{"gotrain"}, strings.Fields(tc.want)...)
		if got := normalizeArgs(in); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, got, want)
		}
	}
	fx := newCkFixture(t)
	cfg := autoRunConfig(t, fx.dir)
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--bf16", "false"}, "precision fp32"},
		{[]string{"--bf16=False"}, "precision fp32"},
		{[]string{"--bf16", "True"}, "precision bf16"},
	} {
		out := filepath.Join(fx.dir, "b"+strings.Join(tc.flags, ""))
		stdout, stderr, err := run(t, append([]string{"train", "--config", cfg, "--model", fx.model, "--data", fx.shard, "--seq-len", "16",
			"--max-steps", "1", "--micro-batch-size", "2", "--output-dir", out, "--peak-flops", "1e9", "--threads", "1",
			"--metrics-addr", "off", "--device", "cpu"}, tc.flags...)...)
		if err != nil || !strings.Contains(stdout, tc.want) {
			t.Errorf("train %v: want %q in the start-up line: %v\n%s%s", tc.flags, tc.want, err, firstLine(stdout), stderr)
		}
	}
}

// TestStrayArgumentsAreErrors: a positional word train does not take is an
// error naming it, before anything runs.
func TestStrayArgumentsAreErrors(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "stray")
	_, _, err := run(t, "train", "--config", fx.cfg, "--model", fx.model, "--data", fx.shard, "--seq-len", "16",
		"--max-steps", "1", "--output-dir", out, "--device", "cpu", "--metrics-addr", "off", "extra")
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "extra"`) {
		t.Fatalf("train ... extra: %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the refused run created %s: %v", out, err)
	}
	if _, _, err := run(t, "estimate", "gpt2"); err == nil || !strings.Contains(err.Error(), `"gpt2"`) {
		t.Errorf("estimate gpt2: %v", err)
	}
}

// TestPreflightToolsDescribeTheTrainRun: estimate and config explain take
// the flags that fill "auto" in train and resolve them as train does: the
// estimate of a run equals the estimate train prints beside its measured
// memory, --gpu-memory prices the same run as the table, and explain's
// summary shows the precision and batch the flags give.
func TestPreflightToolsDescribeTheTrainRun(t *testing.T) {
	fx := newCkFixture(t)
	cfg := autoRunConfig(t, fx.dir)
	flags := []string{"--config", cfg, "--model", fx.model, "--seq-len", "16", "--bf16", "--per_device_train_batch_size", "2",
		"--gradient_accumulation_steps", "3", "--learning_rate", "1e-3", "--lora_r", "4", "--gradient-checkpointing"}
	est, stderr, err := run(t, append([]string{"estimate"}, flags...)...)
	if err != nil {
		t.Fatalf("estimate: %v\n%s", err, stderr)
	}
	if !strings.Contains(est, "micro-batch 2 × seq 16") || !strings.Contains(est, "bf16 parameters") {
		t.Errorf("estimate does not describe the flags' run:\n%s", est)
	}
	stdout, stderr, err := run(t, append(append([]string{"train"}, flags...), "--data", fx.shard, "--max-steps", "1",
		"--output-dir", filepath.Join(fx.dir, "run"), "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu")...)
	if err != nil {
		t.Fatalf("train: %v\n%s%s", err, stdout, stderr)
	}
	estPeak := tableCell(t, est, `peak \(during a step\)\s+(\S+ \S+)`)
	trainPeak := tableCell(t, stdout, `(?m)^peak\s+\S+ \S+\s+(\S+ \S+)`)
	if estPeak != trainPeak {
		t.Errorf("estimate's peak %s, train's estimated peak %s:\n%s\n%s", estPeak, trainPeak, est, stdout)
	}

	// --gpu-memory prices the run of the table, LoRA included.
	adv, _, err := run(t, append([]string{"estimate"}, append(flags, "--gpu-memory", "1KiB")...)...)
	if err != nil || !strings.Contains(adv, "the predicted peak of "+estPeak+" per rank") {
		t.Errorf("--gpu-memory does not price the table's peak %s: %v\n%s", estPeak, err, adv)
	}

	exp, stderr, err := run(t, "config", "explain", cfg, "--nproc", "2", "--bf16", "--per_device_train_batch_size", "2",
		"--gradient_accumulation_steps", "3", "--lora_r", "4", "--gradient-checkpointing")
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, stderr)
	}
	for _, want := range []string{"bf16 (fp32 master weights)  (auto: precision=bf16)", "samples per optimizer step ............... 12  (2 × 3 × 2)",
		"activation checkpointing ................. on  (--gradient-checkpointing)", "LoRA adapters r=4"} {
		if !strings.Contains(exp, want) {
			t.Errorf("explain lacks %q:\n%s", want, exp)
		}
	}
	short, _, err := run(t, "config", "explain", cfg, "--nproc", "2", "--bf16", "--non-default")
	if err != nil || strings.Contains(short, "wall_clock_breakdown") || !strings.Contains(short, "stage ") || len(short) >= len(exp)/2 {
		t.Errorf("explain --non-default (%d bytes, full %d): %v\n%s", len(short), len(exp), err, short)
	}
}

// tableCell is the first group of re in s.
func tableCell(t *testing.T, s, re string) string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no %s in:\n%s", re, s)
	}
	return m[1]
}

// TestHuggingFaceFlagNames: every Hugging Face name resolves to its gotrain
// flag, and a run typed with them trains as asked, the learning rate of each
// step following transformers' linear schedule with ⌈T × warmup_ratio⌉
// warmup steps.
func TestHuggingFaceFlagNames(t *testing.T) {
	cmds := commands()
	train := findCommand(cmds, "train")
	for flag, aliases := range hfFlagNames() {
		for _, alias := range aliases {
			for _, c := range append(append([]*cli.Command{}, cmds...), findCommand(findCommand(cmds, "config").Subcommands, "explain")) {
				if f := lookupFlag(c, flag); f != nil && lookupFlag(c, alias) != f {
					t.Errorf("%s: --%s does not name --%s", c.Name, alias, flag)
				}
			}
		}
	}
	for _, name := range []string{"output_dir", "max_steps", "save_steps", "eval_steps", "logging_steps", "save_total_limit",
		"model_name_or_path", "max_seq_length", "max_length", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
		"warmup_ratio", "lr_scheduler_type", "learning_rate", "per_device_train_batch_size"} {
		if lookupFlag(train, name) == nil {
			t.Errorf("train has no --%s", name)
		}
	}

	fx := newCkFixture(t)
	cfg := autoRunConfig(t, fx.dir)
	out := filepath.Join(fx.dir, "hf")
	const lr = 0.01
	stdout, stderr, err := run(t, "train", "--deepspeed", cfg, "--model", fx.model, "--data", fx.shard, "--max_seq_length", "16",
		"--max_steps", "5", "--output_dir", out, "--save_steps", "2", "--save_total_limit", "1", "--logging_steps", "1",
		"--learning_rate", "0.01", "--lr_scheduler_type", "linear", "--warmup_ratio", "0.3", "--per_device_train_batch_size", "2",
		"--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu")
	if err != nil {
		t.Fatalf("train with Hugging Face names: %v\n%s%s", err, stdout, stderr)
	}
	if !strings.Contains(stderr, "note: ") || !strings.Contains(stderr, "--lr-scheduler-type linear fills one as Hugging Face's Trainer does") {
		t.Errorf("no note on the filled schedule:\n%s", stderr)
	}
	// T = 5, W = ⌈5 × 0.3⌉ = 2; transformers' LambdaLR gives step k the
	// factor λ(k−1): 0, 1/2, then (5−n)/3 for n = 2, 3, 4.
	want := []float64{0, 0.5, 1, 2.0 / 3, 1.0 / 3}
	got := readLRs(t, filepath.Join(out, "metrics.jsonl"))
	if len(got) != len(want) {
		t.Fatalf("lrs %v, want %d steps", got, len(want))
	}
	for i := range want {
		if math.Abs(got[i]-lr*want[i]) > 1e-12 {
			t.Errorf("step %d: lr %g, want %g (transformers' linear schedule)", i+1, got[i], lr*want[i])
		}
	}
	if tags := tagsIn(t, out); len(tags) != 1 {
		t.Errorf("--save_total_limit 1 kept %v", tags)
	}
	if n := strings.Count(stdout, "step "); n < 5 {
		t.Errorf("--logging_steps 1 printed %d step lines:\n%s", n, stdout)
	}
}

// readLRs is the lr of every step record of a metrics.jsonl.
func readLRs(t *testing.T, path string) []float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if v, ok := m["lr"].(float64); ok {
			if _, isStep := m["loss"]; isStep {
				out = append(out, v)
			}
		}
	}
	return out
}

// TestWrongFlagIsOneLine: a mistyped flag gets one line naming the closest
// flag, its separator twin first, and where all are listed; no help page.
func TestWrongFlagIsOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"train", "--save-steps", "5"}, "did you mean --save_steps?"},
		{[]string{"train", "--savesteps", "5"}, "did you mean --save_steps?"},
		{[]string{"train", "--Eval-Steps", "5"}, "did you mean --eval_steps?"},
		{[]string{"train", "--logging-step", "5"}, "did you mean --logging_steps?"},
		{[]string{"config", "explain", "--nprocs", "2", "x.json"}, "config explain: unknown flag --nprocs; did you mean --nproc? (gotrain config explain --help"},
	} {
		stdout, stderr, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--help lists every flag") {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") || stdout != "" || stderr != "" {
			t.Errorf("%v: more than one line:\n%v\n%s%s", tc.args, err, stdout, stderr)
		}
	}
	if _, _, err := run(t, "train", "--seq-len", "many"); err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "seq-len") {
		t.Errorf("bad value: %v", err)
	}
}

// TestClosestFlagRanksSeparatorTwinsFirst: a name equal to a flag once case
// and '-'/'_' are ignored wins over a closer-looking one.
func TestClosestFlagRanksSeparatorTwinsFirst(t *testing.T) {
	cmd := &cli.Command{Name: "x", Flags: []cli.Flag{
		&cli.IntFlag{Name: "stages"}, &cli.IntFlag{Name: "save-every", Aliases: []string{"save_steps"}},
		&cli.IntFlag{Name: "seq-len"}, &cli.IntFlag{Name: "secret", Hidden: true},
	}}
	for name, want := range map[string]string{"save-steps": "save_steps", "SAVE_STEPS": "save_steps", "stage": "stages", "seq_len": "seq-len", "secrets": ""} {
		if got := closestFlag(cmd, name); got != want {
			t.Errorf("closestFlag(%q) = %q, want %q", name, got, want)
		}
	}
}
