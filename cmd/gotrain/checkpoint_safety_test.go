package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Tests of checkpoint safety, resume checks, output files and exit codes:
// each is named after the defect it shows.

// ckFixture is a tiny model, shard and config for in-process train runs.
type ckFixture struct{ dir, model, shard, cfg string }

func newCkFixture(t *testing.T) ckFixture {
	t.Helper()
	dir, modelCfg, shard := distFixture(t)
	return ckFixture{dir: dir, model: modelCfg, shard: shard, cfg: stageConfig(t, dir, 0, 2)}
}

// train runs `gotrain train` in-process for steps steps into out.
func (fx ckFixture) train(t *testing.T, out string, steps int, extra ...string) (stdout, stderr string, err error) {
	t.Helper()
	args := append([]string{"train", "--config", fx.cfg, "--model", fx.model, "--data", fx.shard, "--seq-len", "16",
		"--max-steps", strconv.Itoa(steps), "--output-dir", out, "--peak-flops", "1e9", "--threads", "1",
		"--metrics-addr", "off", "--device", "cpu"}, extra...)
	return run(t, args...)
}

// mustTrain is train that fails the test on error.
func (fx ckFixture) mustTrain(t *testing.T, out string, steps int, extra ...string) string {
	t.Helper()
	stdout, stderr, err := fx.train(t, out, steps, extra...)
	if err != nil {
		t.Fatalf("train %d steps into %s %v: %v\n%s\n%s", steps, out, extra, err, stdout, stderr)
	}
	return stdout
}

// tagsIn lists the tag directories of out/checkpoints.
func tagsIn(t *testing.T, out string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(out, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			tags = append(tags, e.Name())
		}
	}
	return tags
}

func latestOf(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "checkpoints", "latest"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// stepsLogged lists metrics.jsonl's step records' steps in file order.
func stepsLogged(t *testing.T, out string) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"loss"`) {
			continue
		}
		n, err := strconv.Atoi(line[strings.Index(line, `"step":`)+7 : strings.IndexByte(line, ',')])
		if err != nil {
			t.Fatalf("metrics.jsonl line %q: %v", line, err)
		}
		steps = append(steps, n)
	}
	return steps
}

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// flipByte damages one byte in the middle of a tag's params file.
func flipByte(t *testing.T, out, tag string) {
	t.Helper()
	path := filepath.Join(out, "checkpoints", tag, "params.safetensors")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-len(b)/3] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMissingLatestResumeAutoKeepsTheRun: with checkpoints/latest gone,
// --resume auto silently started at step 0, and --save-total-limit then
// pruned the earlier run's tags (latest ended at global_step2 instead of
// continuing from 30). It now resumes from the newest tag and says so.
func TestMissingLatestResumeAutoKeepsTheRun(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 30, "--save-every", "10", "--save-total-limit", "2")
	os.Remove(filepath.Join(out, "checkpoints", "latest"))
	stdout := fx.mustTrain(t, out, 32, "--resume", "auto", "--save-every", "1", "--save-total-limit", "3")
	if got := latestOf(t, out); got != "global_step32" {
		t.Errorf("latest = %s after resuming to 32\n%s", got, stdout)
	}
	if got := tagsIn(t, out); strings.Join(got, " ") != "global_step30 global_step31 global_step32" {
		t.Errorf("tags %v, want 30, 31, 32", got)
	}
	if !strings.Contains(stdout, "resuming from global_step30, the newest checkpoint that verifies") {
		t.Errorf("the resume does not say where it started:\n%s", stdout)
	}
	if got := stepsLogged(t, out); !equalInts(got, seq(1, 32)) {
		t.Errorf("metrics.jsonl steps %v, want 1..32 once each", got)
	}
}

// TestResumeNeverIntoUsedDirIsRefused: --resume never into a directory with
// checkpoints trained afresh and pruned the earlier run; now it is refused
// and the checkpoints stay as they were.
func TestResumeNeverIntoUsedDirIsRefused(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 6, "--save-every", "2")
	before := tagsIn(t, out)
	_, _, err := fx.train(t, out, 3, "--resume", "never", "--save-every", "1", "--save-total-limit", "1")
	if err == nil || !strings.Contains(err.Error(), "--resume auto") || !strings.Contains(err.Error(), "--overwrite") {
		t.Fatalf("--resume never into a used directory: %v; want a refusal naming --resume auto and --overwrite", err)
	}
	if got := tagsIn(t, out); strings.Join(got, " ") != strings.Join(before, " ") || latestOf(t, out) != "global_step6" {
		t.Errorf("tags %v latest %s after the refusal, want %v and global_step6", got, latestOf(t, out), before)
	}
}

// TestUsedDirWithoutResumeFlagIsRefused: train no longer resumes
// implicitly (DeepSpeed and Hugging Face never do): a second run into a
// directory with checkpoints must say --resume auto or --overwrite.
func TestUsedDirWithoutResumeFlagIsRefused(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 3)
	_, _, err := fx.train(t, out, 6)
	if err == nil {
		t.Fatal("a second run into a directory with checkpoints, without --resume, was accepted")
	}
	for _, want := range []string{filepath.Join(out, "checkpoints"), "global_step3", "--resume auto", "--overwrite"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestOverwriteMovesCheckpointsAside: --overwrite starts afresh and keeps
// the old checkpoints and log under a new name, saying where.
func TestOverwriteMovesCheckpointsAside(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 5)
	stdout := fx.mustTrain(t, out, 3, "--overwrite")
	old, _ := filepath.Glob(filepath.Join(out, "checkpoints.old-*"))
	if len(old) != 1 || !strings.Contains(stdout, old[0]) {
		t.Fatalf("moved-aside directories %v; output:\n%s", old, stdout)
	}
	if _, err := os.Stat(filepath.Join(old[0], "global_step5", "meta.json")); err != nil {
		t.Errorf("the old run's checkpoint is not in %s: %v", old[0], err)
	}
	if got := tagsIn(t, out); strings.Join(got, " ") != "global_step3" {
		t.Errorf("new checkpoints %v", got)
	}
	if got := stepsLogged(t, out); !equalInts(got, seq(1, 3)) {
		t.Errorf("metrics.jsonl steps %v, want 1..3", got)
	}
	logs, _ := filepath.Glob(filepath.Join(out, "metrics.jsonl.old-*"))
	if len(logs) != 1 {
		t.Errorf("old metrics logs %v", logs)
	}
	if _, _, err := run(t, "checkpoint", "inspect", old[0]); err != nil {
		t.Errorf("the moved checkpoints no longer verify: %v", err)
	}
}

// TestResumeAutoWithoutLatestPicksNewestVerifyingTag: the newest tag is
// damaged and latest is gone: the resume takes the newest tag that
// verifies and names the one it skipped.
func TestResumeAutoWithoutLatestPicksNewestVerifyingTag(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 20, "--save-every", "5")
	flipByte(t, out, "global_step20")
	os.Remove(filepath.Join(out, "checkpoints", "latest"))
	stdout := fx.mustTrain(t, out, 22, "--resume", "auto")
	if !strings.Contains(stdout, "resuming from global_step15") || !strings.Contains(stdout, "skipped global_step20") {
		t.Errorf("output does not name the chosen and skipped tags:\n%s", stdout)
	}
	if got := stepsLogged(t, out); !equalInts(got, seq(1, 22)) {
		t.Errorf("metrics.jsonl steps %v, want 1..22 once each", got)
	}
}

// TestResumeAutoNoVerifyingTagListsTags: when no tag verifies, --resume
// auto refuses and lists every tag with its problem instead of silently
// starting at step 0.
func TestResumeAutoNoVerifyingTagListsTags(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 10, "--save-every", "5")
	flipByte(t, out, "global_step5")
	flipByte(t, out, "global_step10")
	os.Remove(filepath.Join(out, "checkpoints", "latest"))
	_, _, err := fx.train(t, out, 12, "--resume", "auto")
	if err == nil {
		t.Fatal("--resume auto with no verifying tag trained anyway")
	}
	for _, want := range []string{"verifies", "global_step5", "global_step10", "corrupted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestPruningKeepsOtherLineagesAndHigherSteps: a run resumed from an older
// tag with --save-total-limit deleted the newer tags beyond its step, and a
// run resumed into another run's directory deleted that run's tags. Pruning
// now touches only the saving lineage's tags at or below its step.
func TestPruningKeepsOtherLineagesAndHigherSteps(t *testing.T) {
	fx := newCkFixture(t)
	a := filepath.Join(fx.dir, "a")
	fx.mustTrain(t, a, 30, "--save-every", "10")
	fx.mustTrain(t, a, 12, "--resume", filepath.Join(a, "checkpoints", "global_step10"),
		"--save-every", "1", "--save-total-limit", "1", "--allow-config-change")
	if got := tagsIn(t, a); strings.Join(got, " ") != "global_step12 global_step20 global_step30" {
		t.Errorf("after resuming a at 10 with limit 1: tags %v, want 12, 20, 30", got)
	}
	// Run b owns its directory; a's lineage is resumed into it.
	b := filepath.Join(fx.dir, "b")
	fx.mustTrain(t, b, 3, "--save-every", "1")
	fx.mustTrain(t, b, 14, "--resume", filepath.Join(a, "checkpoints", "global_step12"),
		"--save-every", "1", "--save-total-limit", "1", "--allow-config-change")
	if got := tagsIn(t, b); strings.Join(got, " ") != "global_step1 global_step14 global_step2 global_step3" {
		t.Errorf("b's own tags were pruned by a's lineage: %v", got)
	}
}

// TestEditedMetaStepIsRefused: meta.json had no checksum, so a resume
// accepted "step": 3000000000000 and trained nothing; now the edited file
// is refused, named.
func TestEditedMetaStepIsRefused(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 4)
	meta := filepath.Join(out, "checkpoints", "global_step4", "meta.json")
	b, _ := os.ReadFile(meta)
	os.WriteFile(meta, bytes.Replace(b, []byte(`"step": 4,`), []byte(`"step": 3000000000000,`), 1), 0o644)
	_, _, err := fx.train(t, out, 8, "--resume", "auto")
	if err == nil || !strings.Contains(err.Error(), meta) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("resume from an edited meta.json: %v", err)
	}
}

// TestNothingToDoSummary: resuming a checkpoint already at --max-steps
// printed "done: 0 steps | loss 0.0000 → 0.0000".
func TestNothingToDoSummary(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 3)
	stdout := fx.mustTrain(t, out, 3, "--resume", "auto")
	if strings.Contains(stdout, "done:") || !strings.Contains(stdout,
		"nothing to do: checkpoint global_step3 is already at --max-steps 3; raise --max-steps to train further") {
		t.Errorf("summary when nothing was left to do:\n%s", stdout)
	}
}

// TestConfigChangeOnResumeListedAndRefused: a resume with another learning
// rate and sequence length trained on silently; now every difference is
// listed and those that change the math need --allow-config-change.
func TestConfigChangeOnResumeListedAndRefused(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 3)
	other := filepath.Join(fx.dir, "lr.json")
	b, _ := os.ReadFile(fx.cfg)
	os.WriteFile(other, bytes.Replace(b, []byte(`"lr": 3e-3`), []byte(`"lr": 1e-3`), 1), 0o644)
	changed := ckFixture{dir: fx.dir, model: fx.model, shard: fx.shard, cfg: other}
	stdout, _, err := changed.train(t, out, 5, "--resume", "auto", "--eval-every", "2")
	if err == nil {
		t.Fatal("a resume with another learning rate was accepted without --allow-config-change")
	}
	for _, want := range []string{"config.optimizer.params.lr 0.003 → 0.001", "--allow-config-change"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "eval") {
		t.Errorf("the refusal counts the eval cadence, which does not change the math: %v", err)
	}
	if !strings.Contains(stdout, "eval: every 0 steps; 2 samples per rank and batch; all batches → every 2 steps; 2 samples per rank and batch; all batches") {
		t.Errorf("the listing lacks the eval cadence:\n%s", stdout)
	}
	stdout = changed.mustTrain(t, out, 5, "--resume", "auto", "--allow-config-change")
	if !strings.Contains(stdout, "config.optimizer.params.lr: 0.003 → 0.001   (changes the math)") {
		t.Errorf("an allowed change is not listed:\n%s", stdout)
	}
}

// TestInspectFailsOnBadTag: checkpoint inspect exited 0 with a corrupt or
// incomplete tag in the listing.
func TestInspectFailsOnBadTag(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 4, "--save-every", "2")
	ck := filepath.Join(out, "checkpoints")
	if _, _, err := run(t, "checkpoint", "inspect", ck); err != nil {
		t.Fatalf("inspect of good checkpoints: %v", err)
	}
	flipByte(t, out, "global_step2")
	stdout, _, err := run(t, "checkpoint", "inspect", ck)
	if err == nil || !strings.Contains(err.Error(), "global_step2") {
		t.Errorf("inspect with a corrupted tag: %v\n%s", err, stdout)
	}
	os.Mkdir(filepath.Join(ck, "global_step6"), 0o755) // a save cut before meta.json
	os.WriteFile(filepath.Join(ck, "latest"), []byte("global_step6\n"), 0o644)
	if _, _, err := run(t, "checkpoint", "inspect", ck); err == nil || !strings.Contains(err.Error(), "global_step6") {
		t.Errorf("inspect with latest naming an incomplete tag: %v", err)
	}
}

// TestOutputsUnderUmaskZero: under umask 000, model.safetensors, the plot
// and the export came out 0666; every file gotrain writes is now 0644 and
// every directory 0755.
func TestOutputsUnderUmaskZero(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	fx.mustTrain(t, out, 2)
	if _, stderr, err := run(t, "plot", out); err != nil {
		t.Fatalf("plot: %v\n%s", err, stderr)
	}
	if _, stderr, err := run(t, "checkpoint", "export", "--out", filepath.Join(out, "hf"), filepath.Join(out, "checkpoints")); err != nil {
		t.Fatalf("export: %v\n%s", err, stderr)
	}
	n := 0
	filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		st, _ := d.Info()
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = 0o755
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, st.Mode().Perm(), want)
		}
		n++
		return nil
	})
	if n < 10 {
		t.Errorf("only %d paths under %s", n, out)
	}
}

// startTrainer starts `gotrain train` as a process for a long run and
// waits until it has logged minSteps steps (and, with needLatest, saved a
// checkpoint).
func (fx ckFixture) startTrainer(t *testing.T, out string, minSteps int, needLatest bool, extra ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	args := append([]string{"train", "--config", fx.cfg, "--model", fx.model, "--data", fx.shard, "--seq-len", "16",
		"--max-steps", "1000000", "--output-dir", out, "--peak-flops", "1e9", "--threads", "1",
		"--metrics-addr", "off", "--device", "cpu"}, extra...)
	cmd := gotrainCmd(ctx, args...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(out, "metrics.jsonl"))
		_, lerr := os.Stat(filepath.Join(out, "checkpoints", "latest"))
		if bytes.Count(b, []byte(`"loss"`)) >= minSteps && (!needLatest || lerr == nil) {
			return cmd, &output
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("training did not get going:\n%s", output.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPreemptionExitsWith143: a SIGTERM'd run saved its checkpoint and then
// exited 1, like a failure; it now exits 143 (128+SIGTERM: the job is not
// done) with one line saying what was saved and how to continue.
func TestPreemptionExitsWith143(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	cmd, output := fx.startTrainer(t, out, 3, false)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("exit after SIGTERM: %v, want status 143\n%s", err, output.String())
	}
	tag := latestOf(t, out)
	if want := "gotrain: stopped by SIGTERM after saving checkpoint " + tag + "; continue with --resume auto\n"; !strings.HasSuffix(output.String(), want) {
		t.Errorf("last line is not %q:\n%s", want, lastLines(output.String(), 3))
	}
}

// TestSecondRunInSameDirIsRefusedByLock: two runs in one output directory
// wrote the same checkpoints and log; the second now fails at once,
// naming the first's pid and host.
func TestSecondRunInSameDirIsRefusedByLock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	cmd, output := fx.startTrainer(t, out, 1, false)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	host, _ := os.Hostname()
	_, _, err := fx.train(t, out, 2, "--resume", "auto")
	if err == nil {
		t.Fatalf("a second run in %s was accepted while the first runs:\n%s", out, output.String())
	}
	for _, want := range []string{"in use", "pid " + strconv.Itoa(cmd.Process.Pid), host, "started"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestCrashThenResumeLogsEachStepOnce: a run killed (SIGKILL) some steps
// after its last checkpoint, then resumed, left those steps twice in
// metrics.jsonl. The resume now drops them first.
func TestCrashThenResumeLogsEachStepOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	fx := newCkFixture(t)
	var out string
	var logged []int
	var resumeFrom int
	// The kill must land after a step past the latest checkpoint, so that
	// the resume replays logged steps; on a loaded machine the run can
	// reach the next save first, and then the crash is tried again.
	for attempt := 0; ; attempt++ {
		out = filepath.Join(fx.dir, fmt.Sprintf("run%d", attempt))
		cmd, _ := fx.startTrainer(t, out, 8, true, "--save-every", "5")
		cmd.Process.Kill()
		cmd.Wait()
		logged = stepsLogged(t, out)
		resumeFrom, _ = strconv.Atoi(strings.TrimPrefix(latestOf(t, out), "global_step"))
		if len(logged) > resumeFrom {
			break
		}
		if attempt == 4 {
			t.Fatalf("in 5 tries the killed run never stopped past its latest checkpoint (last: logged %d steps, latest at %d): nothing to replay", len(logged), resumeFrom)
		}
	}
	end := len(logged) + 2
	fx.mustTrain(t, out, end, "--resume", "auto", "--save-every", "5")
	if got := stepsLogged(t, out); !equalInts(got, seq(1, end)) {
		t.Errorf("metrics.jsonl steps after crash at %d and resume from %d: %v, want 1..%d once each", len(logged), resumeFrom, got, end)
	}
}

// TestResumeAutoLatestNamingMissingTagFallsBack: a latest that names a tag
// which is not there (a save cut between two renames on a file system
// without RENAME_EXCHANGE) is treated like a missing latest.
func TestResumeAutoLatestNamingMissingTagFallsBack(t *testing.T) {
	fx := newCkFixture(t)
	out := filepath.Join(fx.dir, "run")
	fx.mustTrain(t, out, 4, "--save-every", "2")
	os.WriteFile(filepath.Join(out, "checkpoints", "latest"), []byte("global_step6\n"), 0o644)
	stdout := fx.mustTrain(t, out, 5, "--resume", "auto")
	if !strings.Contains(stdout, "latest names global_step6, which is not in") || !strings.Contains(stdout, "resuming from global_step4") {
		t.Errorf("output:\n%s", stdout)
	}
	if got := stepsLogged(t, out); !equalInts(got, seq(1, 5)) {
		t.Errorf("metrics.jsonl steps %v", got)
	}
}
