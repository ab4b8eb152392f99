package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/data"
)

// Tests of train --stages (a curriculum) and of what --num-train-epochs
// fills in the config.

// stepRec is one optimizer step of metrics.jsonl.
type stepRec struct {
	Step int     `json:"step"`
	Loss float64 `json:"loss"`
	LR   float64 `json:"lr"`
}

// stepRecs reads metrics.jsonl's step records in file order.
func stepRecs(t *testing.T, out string) []stepRec {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []stepRec
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), `"loss"`) {
			continue
		}
		var r stepRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	return recs
}

// epochShard writes a shard of exactly groups micro-batch groups of B·T
// tokens (plus the one target beyond), so an epoch ends exactly there.
func epochShard(t *testing.T, dir, name string, groups, B, T, salt int) string {
	t.Helper()
	tokens := make([]int32, groups*B*T+1)
	for i := range tokens {
		tokens[i] = int32((i*i + salt*i + 7*i/3) % 64)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := data.WriteShard(path, data.ShardGPT2, tokens); err != nil {
		t.Fatal(err)
	}
	return path
}

// scheduledConfig is the fixture's config with a WarmupDecayLR schedule
// whose total_num_steps is "auto".
func scheduledConfig(t *testing.T, dir string) string {
	t.Helper()
	f := filepath.Join(dir, "ds_sched.json")
	os.WriteFile(f, []byte(`{
		"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
		"optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
		"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-3,
			"warmup_num_steps": 2, "total_num_steps": "auto"}}
	}`), 0o644)
	return f
}

func writeStages(t *testing.T, dir, js string) string {
	t.Helper()
	f := filepath.Join(dir, "stages.json")
	if err := os.WriteFile(f, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// stagesArgs is `gotrain train` with a stages file into out.
func (fx ckFixture) stagesArgs(cfg, stages, out string, extra ...string) []string {
	return append([]string{"train", "--config", cfg, "--model", fx.model, "--stages", stages,
		"--output-dir", out, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu"}, extra...)
}

// tagMeta is what a test reads from a tag's meta.json.
type tagMeta struct {
	Step         int64 `json:"step"`
	DataPosition struct {
		Updates int `json:"updates"`
		Stage   *struct {
			Index     int    `json:"index"`
			Name      string `json:"name"`
			FirstStep int    `json:"first_step"`
			LastStep  int    `json:"last_step"`
		} `json:"stage"`
	} `json:"data_position"`
}

func readTagMeta(t *testing.T, out, tag string) tagMeta {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "checkpoints", tag, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m tagMeta
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestStagesContinueTheOptimizerAndSchedule: stage 1 trains 2 steps (4 of
// its 6 micro-batch groups) on shard a, stage 2 one epoch (3 steps) on
// shard b, both cut from one token stream s so that a single run on s for
// 5 steps reads exactly the same micro-batches. The curriculum must then train exactly as that run: any
// state not carried across the boundary (AdamW's moments and
// bias-correction step, the schedule and its "auto" total of 5 steps, the
// weights) or a data position carried into stage 2's data would change
// the losses. With lr_scale 0.5 on stage 2, its learning rates are half
// the single run's and its first loss (computed before its first update)
// is still equal.
func TestStagesContinueTheOptimizerAndSchedule(t *testing.T) {
	fx := newCkFixture(t)
	const B, T = 2, 16
	stream := epochShard(t, filepath.Join(fx.dir, "s"), "train_000000.bin", 10, B, T, 3)
	_, toks, err := data.ReadShard(stream)
	if err != nil {
		t.Fatal(err)
	}
	for dir, part := range map[string][]int32{"a": toks[:6*B*T+1], "b": toks[4*B*T:]} {
		os.MkdirAll(filepath.Join(fx.dir, dir), 0o755)
		if err := data.WriteShard(filepath.Join(fx.dir, dir, "train_000000.bin"), data.ShardGPT2, part); err != nil {
			t.Fatal(err)
		}
	}
	cfg := scheduledConfig(t, fx.dir)

	single := filepath.Join(fx.dir, "single")
	args := []string{"train", "--config", cfg, "--model", fx.model, "--data", stream, "--seq-len", strconv.Itoa(T),
		"--max-steps", "5", "--output-dir", single, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu"}
	if stdout, stderr, err := run(t, args...); err != nil {
		t.Fatalf("single run: %v\n%s\n%s", err, stdout, stderr)
	}
	want := stepRecs(t, single)

	for _, scale := range []float64{1, 0.5} {
		out := filepath.Join(fx.dir, fmt.Sprintf("staged%g", scale))
		st := writeStages(t, fx.dir, fmt.Sprintf(`{"stages": [
			{"name": "one", "data": ["a/train_000000.bin"], "seq_len": 16, "steps": 2},
			{"name": "two", "data": ["b/train_*.bin"], "seq_len": 16, "epochs": 1, "lr_scale": %g}]}`, scale))
		stdout, stderr, err := run(t, fx.stagesArgs(cfg, st, out)...)
		if err != nil {
			t.Fatalf("stages (lr_scale %g): %v\n%s\n%s", scale, err, stdout, stderr)
		}
		got := stepRecs(t, out)
		if len(got) != len(want) {
			t.Fatalf("lr_scale %g: %d steps logged, want %d\n%s", scale, len(got), len(want), stdout)
		}
		for i, w := range want {
			g := got[i]
			lr := w.LR
			if g.Step > 2 {
				lr *= scale
			}
			if g.Step != w.Step || math.Abs(g.LR-lr) > 1e-12*w.LR {
				t.Errorf("lr_scale %g step %d: lr %g, want %g (single run %g)", scale, g.Step, g.LR, lr, w.LR)
			}
			if (scale == 1 || g.Step <= 3) && g.Loss != w.Loss {
				t.Errorf("lr_scale %g step %d: loss %.9g, single run %.9g", scale, g.Step, g.Loss, w.Loss)
			}
			if scale != 1 && g.Step > 3 && g.Loss == w.Loss {
				t.Errorf("lr_scale %g step %d: loss %.9g equals the unscaled run's", scale, g.Step, g.Loss)
			}
		}
		// The boundary checkpoint is stage 1's, with its 2 AdamW updates;
		// the final one stage 2's, with all 5.
		if m := readTagMeta(t, out, "global_step2"); m.DataPosition.Stage == nil || m.DataPosition.Stage.Name != "one" || m.DataPosition.Updates != 2 {
			t.Errorf("global_step2's trainer state: %+v", m.DataPosition)
		}
		if m := readTagMeta(t, out, "global_step5"); m.DataPosition.Stage == nil || m.DataPosition.Stage.Name != "two" ||
			m.DataPosition.Stage.FirstStep != 3 || m.DataPosition.Updates != 5 {
			t.Errorf("global_step5's trainer state: %+v", m.DataPosition)
		}
		if !strings.Contains(stdout, `stage 2/2 "two": steps 3..5, seq_len 16, lr scale `+strconv.FormatFloat(scale, 'g', -1, 64)) {
			t.Errorf("no stage 2 line:\n%s", stdout)
		}
	}
}

// TestNumTrainEpochsFillsAutoTotalSteps: --num-train-epochs E sets the
// scheduler's "auto" total_num_steps to the steps it derives, so the
// learning rates equal a --max-steps run of ceil(E × ⌊groups/gas⌋) steps
// (here 1.5 × 3 → 5), whose decay ends at its last step.
func TestNumTrainEpochsFillsAutoTotalSteps(t *testing.T) {
	fx := newCkFixture(t)
	shard := epochShard(t, filepath.Join(fx.dir, "a"), "train_000000.bin", 6, 2, 16, 3)
	cfg := scheduledConfig(t, fx.dir)
	base := []string{"train", "--config", cfg, "--model", fx.model, "--data", shard, "--seq-len", "16",
		"--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu"}
	epochs, steps := filepath.Join(fx.dir, "epochs"), filepath.Join(fx.dir, "steps")
	if o, e, err := run(t, append(base, "--output-dir", epochs, "--num-train-epochs", "1.5")...); err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, e)
	}
	if o, e, err := run(t, append(base, "--output-dir", steps, "--max-steps", "5")...); err != nil {
		t.Fatalf("%v\n%s\n%s", err, o, e)
	}
	got, want := stepRecs(t, epochs), stepRecs(t, steps)
	if len(got) != 5 || len(want) != 5 {
		t.Fatalf("%d and %d steps, want 5 each", len(got), len(want))
	}
	for i := range want {
		if got[i].LR != want[i].LR {
			t.Errorf("step %d: lr %g with epochs, %g with --max-steps 5", i+1, got[i].LR, want[i].LR)
		}
	}
	// WarmupDecayLR over 5 steps with 2 warmup steps: step k runs with
	// the value at k−2, decaying linearly to 0 at 5.
	if w := 3e-3 * float64(5-3) / float64(5-2); math.Abs(got[4].LR-w) > 1e-12 {
		t.Errorf("step 5's lr %g, want %g: total_num_steps was not 5", got[4].LR, w)
	}
}

// TestStagesKilledMidStage2ResumeAndFinish is the curriculum's acceptance
// test: two stages of different sequence lengths and data; the process is
// killed (SIGKILL) inside stage 2, resumed with --resume auto, and must
// finish with every step logged once and exactly the losses of an
// uninterrupted run of the same stages (so the resume landed in stage 2
// at the right data position with the right optimizer state). Checkpoints
// record their stage.
func TestStagesKilledMidStage2ResumeAndFinish(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	fx := newCkFixture(t)
	epochShard(t, filepath.Join(fx.dir, "short"), "train_000000.bin", 40, 2, 8, 5)
	epochShard(t, filepath.Join(fx.dir, "long"), "train_000000.bin", 40, 2, 16, 11)
	const s1, s2 = 4, 250
	st := writeStages(t, fx.dir, fmt.Sprintf(`{"stages": [
		{"name": "short", "data": ["short/train_*.bin"], "seq_len": 8, "steps": %d},
		{"name": "long", "data": ["long/train_*.bin"], "seq_len": 16, "steps": %d, "lr_scale": 0.5}]}`, s1, s2))
	out := filepath.Join(fx.dir, "run")
	args := fx.stagesArgs(fx.cfg, st, out, "--save-every", "5", "--resume", "auto")

	cmd := gotrainCmd(t.Context(), args...)
	var output strings.Builder
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed once a stage-2 checkpoint exists and some steps beyond it ran.
	deadline := time.Now().Add(60 * time.Second)
	for {
		tag, _ := os.ReadFile(filepath.Join(out, "checkpoints", "latest"))
		n, _ := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(tag)), "global_step"))
		b, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
		if n > s1 && strings.Count(string(b), `"loss"`) >= n+2 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("stage 2 did not get going:\n%s", output.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	killedAt := len(stepsLogged(t, out))
	tag := latestOf(t, out)
	if killedAt >= s1+s2 {
		t.Fatalf("the run finished (%d steps) before it was killed", killedAt)
	}
	if m := readTagMeta(t, out, tag); m.DataPosition.Stage == nil || m.DataPosition.Stage.Name != "long" || m.Step <= s1 {
		t.Fatalf("latest %s at kill: %+v, want a stage-2 checkpoint", tag, m)
	}
	if m := readTagMeta(t, out, "global_step"+strconv.Itoa(s1)); m.DataPosition.Stage == nil ||
		m.DataPosition.Stage.Name != "short" || m.DataPosition.Stage.LastStep != s1 {
		t.Fatalf("stage 1's final checkpoint: %+v", m)
	}

	stdout, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("resume: %v\n%s\n%s", err, stdout, stderr)
	}
	if !strings.Contains(stdout, "resumed from "+tag) || !strings.Contains(stdout, `stage 2/2 "long"`) || strings.Contains(stdout, `stage 1/2`) {
		t.Errorf("the resume did not continue stage 2 from %s:\n%s", tag, stdout)
	}
	if got := stepsLogged(t, out); !equalInts(got, seq(1, s1+s2)) {
		t.Errorf("steps logged after kill at %d and resume from %s: %v", killedAt, tag, got)
	}
	if m := readTagMeta(t, out, "global_step"+strconv.Itoa(s1+s2)); m.DataPosition.Stage == nil || m.DataPosition.Stage.Name != "long" {
		t.Errorf("final checkpoint: %+v", m)
	}

	// The same stages without the kill give the same losses.
	ref := filepath.Join(fx.dir, "ref")
	if o, e, err := run(t, fx.stagesArgs(fx.cfg, st, ref)...); err != nil {
		t.Fatalf("uninterrupted: %v\n%s\n%s", err, o, e)
	}
	got, want := stepRecs(t, out), stepRecs(t, ref)
	if len(got) != len(want) {
		t.Fatalf("%d steps, uninterrupted %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %+v after kill and resume, %+v uninterrupted", want[i].Step, got[i], want[i])
		}
	}
}

// TestStagesFlagConflictsAndBadFiles: a stages file's errors name the
// stage and the key before anything trains, and the flags a stage sets are
// refused beside --stages.
func TestStagesFlagConflictsAndBadFiles(t *testing.T) {
	fx := newCkFixture(t)
	epochShard(t, filepath.Join(fx.dir, "a"), "train_000000.bin", 6, 2, 16, 3)
	out := filepath.Join(fx.dir, "run")
	good := `{"data": ["a/train_000000.bin"], "seq_len": 16, "steps": 2}`
	for _, tc := range []struct {
		name, stages string
		extra        []string
		wants        []string
	}{
		{"unknown key", `{"stages": [` + good + `, {"name": "b", "data": ["a/train_000000.bin"], "seq_len": 16, "step": 2}]}`, nil,
			[]string{`stage 2 ("b")`, `unknown key "step"`, `did you mean "steps"`}},
		{"missing data", `{"stages": [{"seq_len": 16, "steps": 2}]}`, nil, []string{"stage 1", `"data" is missing`}},
		{"data not there", `{"stages": [{"name": "x", "data": ["nope/*.bin"], "seq_len": 16, "steps": 2}]}`, nil,
			[]string{`stage 1 ("x")`, `"data"`, "matches no files"}},
		{"seq_len beyond context", `{"stages": [` + good + `, {"data": ["a/train_000000.bin"], "seq_len": 32, "steps": 2}]}`, nil,
			[]string{`stage 2 ("stage2")`, `"seq_len"`, "32", "16"}},
		{"zero steps", `{"stages": [{"data": ["a/train_000000.bin"], "seq_len": 16, "steps": 0}]}`, nil, []string{"stage 1", `"steps" is 0`}},
		{"flag conflict", `{"stages": [` + good + `]}`, []string{"--seq-len", "8"}, []string{"--seq-len and --stages both set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := writeStages(t, fx.dir, tc.stages)
			_, _, err := run(t, fx.stagesArgs(fx.cfg, st, out, tc.extra...)...)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if _, serr := os.Stat(filepath.Join(out, "metrics.jsonl")); serr == nil {
				t.Errorf("a refused stages file trained")
			}
		})
	}
	if _, _, err := run(t, "train", "--model", fx.model, "--output-dir", out); err == nil || !strings.Contains(err.Error(), "--data is required") {
		t.Errorf("train without --data or --stages: %v", err)
	}
}

// curriculumConfig is the fixture's config with a curriculum_learning block.
func curriculumConfig(t *testing.T, dir, name, block string) string {
	t.Helper()
	f := filepath.Join(dir, name)
	os.WriteFile(f, []byte(`{
		"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 0.5,
		"optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
		"curriculum_learning": `+block+`}`), 0o644)
	return f
}

// TestCurriculumLearningCutsSamples: DeepSpeed's seqlen curriculum cuts
// each sample of a step to its first seq len tokens. A run at --seq-len 16
// whose schedule keeps 8 must train exactly as a --seq-len 8 run on a
// shard holding those cut samples (built so each cut row's last target,
// its 9th token, is also where the next row starts). A fixed_linear
// schedule from 8 to 16 over 4 steps with difficulty_step 8 trains steps
// 1-3 at 8 tokens and then 16 (DeepSpeed's formula: ⌊n/4·8+8⌋ rounded down
// to a multiple of 8), which the logged token counts show.
func TestCurriculumLearningCutsSamples(t *testing.T) {
	fx := newCkFixture(t)
	const B, T, cut, rows = 2, 16, 8, 24
	full := make([]int32, rows*T+1)
	for i := range full {
		full[i] = int32((i*i + 5*i + i/7) % 64)
	}
	for r := range rows {
		full[r*T+cut] = full[(r+1)*T]
	}
	var short []int32
	for r := range rows {
		short = append(short, full[r*T:r*T+cut]...)
	}
	short = append(short, full[rows*T])
	fullShard, shortShard := filepath.Join(fx.dir, "full.bin"), filepath.Join(fx.dir, "short.bin")
	if err := data.WriteShard(fullShard, data.ShardGPT2, full); err != nil {
		t.Fatal(err)
	}
	if err := data.WriteShard(shortShard, data.ShardGPT2, short); err != nil {
		t.Fatal(err)
	}
	base := func(cfg, shard, out string, seq int) []string {
		return []string{"train", "--config", cfg, "--model", fx.model, "--data", shard, "--seq-len", strconv.Itoa(seq),
			"--max-steps", "5", "--output-dir", out, "--peak-flops", "1e9", "--threads", "1", "--metrics-addr", "off", "--device", "cpu"}
	}
	discrete := curriculumConfig(t, fx.dir, "cl_discrete.json", `{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
		"max_difficulty": 16, "schedule_type": "fixed_discrete", "schedule_config": {"difficulty": [8, 16], "max_step": [1000]}}`)
	cl, ref := filepath.Join(fx.dir, "cl"), filepath.Join(fx.dir, "ref")
	if o, e, err := run(t, base(discrete, fullShard, cl, T)...); err != nil {
		t.Fatalf("curriculum: %v\n%s\n%s", err, o, e)
	}
	if o, e, err := run(t, base(fx.cfg, shortShard, ref, cut)...); err != nil {
		t.Fatalf("reference: %v\n%s\n%s", err, o, e)
	}
	got, want := stepRecs(t, cl), stepRecs(t, ref)
	if len(got) != 5 || len(want) != 5 {
		t.Fatalf("%d and %d steps", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: curriculum %+v, cut samples at --seq-len 8 %+v", i+1, got[i], want[i])
		}
	}

	linear := curriculumConfig(t, fx.dir, "cl_linear.json", `{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
		"max_difficulty": 16, "schedule_type": "fixed_linear", "schedule_config": {"total_curriculum_step": 4, "difficulty_step": 8}}`)
	lin := filepath.Join(fx.dir, "lin")
	if o, e, err := run(t, base(linear, fullShard, lin, T)...); err != nil {
		t.Fatalf("fixed_linear: %v\n%s\n%s", err, o, e)
	}
	b, err := os.ReadFile(filepath.Join(lin, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var prev int64
	var lens []int
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r struct {
			Loss   *float64 `json:"loss"`
			Tokens int64    `json:"tokens"`
		}
		if json.Unmarshal([]byte(line), &r) != nil || r.Loss == nil {
			continue
		}
		lens = append(lens, int(r.Tokens-prev)/(B*2))
		prev = r.Tokens
	}
	if !equalInts(lens, []int{8, 8, 8, 16, 16}) {
		t.Errorf("fixed_linear 8→16 over 4 steps trained at lengths %v, want [8 8 8 16 16]", lens)
	}

	// A curriculum beyond --seq-len is refused, naming the key.
	long := curriculumConfig(t, fx.dir, "cl_long.json", `{"enabled": true, "curriculum_type": "seqlen", "min_difficulty": 8,
		"max_difficulty": 32, "schedule_type": "fixed_discrete", "schedule_config": {"difficulty": [8, 32], "max_step": [2]}}`)
	if _, _, err := run(t, base(long, fullShard, filepath.Join(fx.dir, "long"), T)...); err == nil || !strings.Contains(err.Error(), "curriculum_learning.max_difficulty 32 is above --seq-len 16") {
		t.Errorf("max_difficulty beyond --seq-len: %v", err)
	}
}
