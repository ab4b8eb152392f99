package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/model"
)

// trainResult is one `gotrain train` process: what it printed, how it
// ended, and how long it took.
type trainResult struct {
	stdout, stderr string
	err            error
	took           time.Duration
	outDir         string
}

// trainProcess runs the test binary as `gotrain train` on the fixture's
// model, shard and config with args added, killing it after limit: the
// defects here are hangs and late failures, so each run is a real process
// with a deadline.
func trainProcess(t *testing.T, limit time.Duration, args ...string) trainResult {
	t.Helper()
	dir, modelCfg, shard := distFixture(t)
	return trainProcessIn(t, limit, dir, append([]string{"--model", modelCfg, "--data", shard}, args...)...)
}

func trainProcessIn(t *testing.T, limit time.Duration, dir string, args ...string) trainResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	out := filepath.Join(dir, "run")
	base := []string{"train", "--config", stageConfig(t, dir, 0, 4), "--seq-len", "16", "--max-steps", "300",
		"--device", "cpu", "--metrics-addr", "off", "--peak-flops", "1e9", "--output-dir", out, "--resume", "never"}
	cmd := gotrainCmd(ctx, append(base, args...)...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	start := time.Now()
	err := cmd.Run()
	r := trainResult{stdout: so.String(), stderr: se.String(), err: err, took: time.Since(start), outDir: out}
	if ctx.Err() != nil {
		t.Fatalf("gotrain train %q still running after %v (killed)\nstdout:\n%s\nstderr:\n%s", args, limit, lastLines(r.stdout, 5), lastLines(r.stderr, 5))
	}
	return r
}

// wantRefused checks that the run failed with an error saying every one of
// wants, did not crash, and trained nothing.
func (r trainResult) wantRefused(t *testing.T, wants ...string) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(r.err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1 (an error value)\nstdout:\n%s\nstderr:\n%s", r.err, lastLines(r.stdout, 5), lastLines(r.stderr, 20))
	}
	for _, bad := range []string{"panic", "goroutine ", "fatal error"} {
		if strings.Contains(r.stderr, bad) {
			t.Fatalf("stderr shows a crash (%q):\n%s", bad, lastLines(r.stderr, 20))
		}
	}
	for _, w := range wants {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, lastLines(r.stderr, 5))
		}
	}
	if strings.Contains(r.stdout, "step ") {
		t.Errorf("training steps ran before the error:\n%s", lastLines(r.stdout, 5))
	}
	if b, err := os.ReadFile(filepath.Join(r.outDir, "metrics.jsonl")); err == nil && len(b) > 0 {
		t.Errorf("metrics.jsonl has %d bytes: steps ran", len(b))
	}
}

// writeTokenizerInfo puts a tokenizer.json beside shard.
func writeTokenizerInfo(t *testing.T, shard, content string) string {
	t.Helper()
	path := filepath.Join(filepath.Dir(shard), data.TokenizerInfoFile)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The defect: "vocab_size": -5 in the data directory's tokenizer.json
// sized a preset model's vocabulary and panicked in model init.
func TestTrainTokenizerInfoNegativeVocabSizeIsAnError(t *testing.T) {
	dir, _, shard := distFixture(t)
	path := writeTokenizerInfo(t, shard, `{"tokenizer":"gpt2","eot":50256,"vocab_size":-5}`)
	r := trainProcessIn(t, 30*time.Second, dir, "--model", "gpt2-tiny", "--data", shard)
	r.wantRefused(t, path, `"vocab_size" is -5`)
}

// The defect: a huge vocab_size there sized the model's embedding from it
// and the process died in a fatal out-of-memory. It must be refused before
// anything is sized from it: quickly, as an error, with no crash.
func TestTrainTokenizerInfoHugeVocabSizeIsAnError(t *testing.T) {
	dir, _, shard := distFixture(t)
	path := writeTokenizerInfo(t, shard, `{"tokenizer":"gpt2","eot":50256,"vocab_size":100000000000}`)
	r := trainProcessIn(t, 30*time.Second, dir, "--model", "gpt2-tiny", "--data", shard)
	r.wantRefused(t, path, `"vocab_size" is 100000000000`)
}

// The defect: vocab_size 2⁶³−1 in a --model config.json overflowed
// PadVocab and NumParams and panicked.
func TestTrainConfigVocabSizeMaxInt64IsAnError(t *testing.T) {
	dir, _, shard := distFixture(t)
	modelCfg := filepath.Join(dir, "huge.json")
	os.WriteFile(modelCfg, []byte(`{"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 32,
		"n_positions": 16, "vocab_size": 9223372036854775807}`), 0o644)
	r := trainProcessIn(t, 30*time.Second, dir, "--model", modelCfg, "--data", shard)
	r.wantRefused(t, modelCfg, `"vocab_size" = 9223372036854775807`)
}

// The defect: a token id ≥ the model's vocabulary deep in a shard failed
// the run only when training reached it (step 68 in the report), with no
// file or offset and no checkpoint, so every step before it was lost. It
// must fail before step 1, naming the file and the token offset.
func TestTrainOutOfVocabTokenDeepInShardFailsBeforeStep1(t *testing.T) {
	dir, modelCfg, _ := distFixture(t)
	toks := make([]int32, 40*8*16+1)
	for i := range toks {
		toks[i] = int32((i*i + 7*i/3) % 64)
	}
	const at = 4352 // batch 68 of 4×16 tokens
	toks[at] = 300
	shard := filepath.Join(dir, "deep", "train_000000.bin")
	os.Mkdir(filepath.Dir(shard), 0o755)
	// Written by hand as llm.c writes shards (no max-token record), so the
	// loader must scan the tokens to find it.
	b := make([]byte, 1024+2*len(toks))
	put32 := func(i int, v uint32) {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	put32(0, 20240520)
	put32(1, 1)
	put32(2, uint32(len(toks)))
	for i, v := range toks {
		b[1024+2*i], b[1024+2*i+1] = byte(v), byte(v>>8)
	}
	if err := os.WriteFile(shard, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r := trainProcessIn(t, 60*time.Second, dir, "--model", modelCfg, "--data", shard)
	r.wantRefused(t, shard, "token id 300", fmt.Sprintf("token offset %d", at), "vocabulary [0, 64)")
	// The same shard as validation data is refused the same way.
	_, _, good := distFixture(t)
	r = trainProcessIn(t, 60*time.Second, dir, "--model", modelCfg, "--data", good, "--val-data", shard)
	r.wantRefused(t, "--val-data", shard, fmt.Sprintf("token offset %d", at))
}

// The defect: a FIFO as --data, --val-data, --init-from, --config, the
// --model config.json or the data's tokenizer.json blocked the run forever
// in open(2). Each must be a clear error within seconds.
func TestTrainFIFOInputsAreRefusedQuickly(t *testing.T) {
	dir, modelCfg, shard := distFixture(t)
	fifo := func(name string) string {
		p := filepath.Join(dir, name)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fdata, fval, finit, fconf, fmodel := fifo("fifo_train.bin"), fifo("fifo_val.bin"), fifo("fifo.safetensors"), fifo("fifo_ds.json"), fifo("fifo_model.json")
	tokDir := filepath.Join(dir, "tok")
	os.Mkdir(tokDir, 0o755)
	tokShard := filepath.Join(tokDir, "train_000000.bin")
	if b, err := os.ReadFile(shard); err != nil || os.WriteFile(tokShard, b, 0o644) != nil {
		t.Fatal(err)
	}
	ftok := filepath.Join(tokDir, data.TokenizerInfoFile)
	if err := syscall.Mkfifo(ftok, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		args       []string
	}{
		{"--data", fdata, []string{"--model", modelCfg, "--data", fdata}},
		{"--val-data", fval, []string{"--model", modelCfg, "--data", shard, "--val-data", fval}},
		{"--init-from", finit, []string{"--model", modelCfg, "--data", shard, "--init-from", finit}},
		{"--config", fconf, []string{"--model", modelCfg, "--data", shard, "--config", fconf}},
		{"--model", fmodel, []string{"--model", fmodel, "--data", shard}},
		{"tokenizer.json", ftok, []string{"--model", modelCfg, "--data", tokShard}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := trainProcessIn(t, 20*time.Second, dir, tc.args...)
			r.wantRefused(t, tc.path, "named pipe (FIFO)")
		})
	}
}

// The defect: n_layer 100000 with n_embd 65536 ran on for minutes with no
// error. It must be refused in well under a second of work, with the numbers.
func TestTrainAbsurdModelRefusedFast(t *testing.T) {
	dir, _, shard := distFixture(t)
	for _, tc := range []struct {
		layers int
		says   []string
	}{
		// Past gotrain's parameter limit: refused when the config is read.
		{100000, []string{"n_layer = 100000", "n_embd = 65536", "5.2e+15 parameters"}},
		// Under the limit but far past any machine's memory: the memory gate.
		{1000, []string{"51,540,469,088,256 parameters", "parameters", "fp32 master copy alone needs", "MemTotal", "ZeRO stage 3"}},
	} {
		modelCfg := filepath.Join(dir, fmt.Sprintf("absurd%d.json", tc.layers))
		os.WriteFile(modelCfg, []byte(fmt.Sprintf(`{"model_type": "gpt2", "n_layer": %d, "n_head": 16, "n_embd": 65536,
			"n_positions": 16, "vocab_size": 64}`, tc.layers)), 0o644)
		r := trainProcessIn(t, 30*time.Second, dir, "--model", modelCfg, "--data", shard)
		r.wantRefused(t, append([]string{modelCfg}, tc.says...)...)
		// A process start and a BLAS self-check; nothing model-sized.
		if r.took > 5*time.Second {
			t.Errorf("n_layer %d refused after %v", tc.layers, r.took)
		}
	}
}

// The defect: a tokenizer.json that does not parse (or names an unknown
// tokenizer) surfaced only after training had run and saved, or not at all.
// It must stop the run at start-up, before step 1.
func TestTrainBadTokenizerInfoFailsAtStartup(t *testing.T) {
	for _, tc := range []struct{ content, say string }{
		{`not json{`, "not valid JSON"},
		{`{"tokenizer":"sentencepiece","eot":1,"vocab_size":64}`, `unknown tokenizer "sentencepiece"`},
	} {
		dir, modelCfg, shard := distFixture(t)
		path := writeTokenizerInfo(t, shard, tc.content)
		// --init-from skips sizing the vocabulary from the data: the file
		// must be checked all the same.
		weights := filepath.Join(dir, "init.bin")
		cfg, err := model.ByName(modelCfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := model.SaveLLMC(weights, cfg, model.InitParams(cfg, 1), backend.F32); err != nil {
			t.Fatal(err)
		}
		for _, extra := range [][]string{nil, {"--init-from", weights}} {
			r := trainProcessIn(t, 60*time.Second, dir, append([]string{"--model", modelCfg, "--data", shard}, extra...)...)
			r.wantRefused(t, path, tc.say)
			if _, err := os.Stat(filepath.Join(r.outDir, "checkpoints")); err == nil {
				t.Errorf("%v: a checkpoint was saved before the error", extra)
			}
		}
	}
}

// `gotrain sample` fell back to --tokenizer when the tokenizer.json beside
// the weights did not parse, silently decoding with a tokenizer the model
// may never have seen.
func TestSampleBrokenTokenizerInfoIsAnError(t *testing.T) {
	dir := t.TempDir()
	cfg := model.GPT2(model.Config{MaxT: 16, V: 257, Vp: model.PadVocab(257), L: 1, NH: 2, C: 16})
	weights := filepath.Join(dir, "model.safetensors")
	if err := model.SaveHF(weights, cfg, model.InitParams(cfg, 1), backend.F32); err != nil {
		t.Fatal(err)
	}
	if err := model.WriteHFConfig(filepath.Join(dir, "config.json"), cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, data.TokenizerInfoFile)
	os.WriteFile(path, []byte(`{"tokenizer":"byte",`), 0o644)
	_, _, err := run(t, "sample", "--from", weights, "--tokenizer", "byte", "--max-new-tokens", "2")
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("sample with a broken tokenizer.json: %v", err)
	}
}

func TestCheckModelFits(t *testing.T) {
	cfg, _ := model.Preset("gpt2") // 124,475,904 params: 498 MB of fp32 master weights
	const gb = 1 << 30
	one := launch.Rank{WorldSize: 1, LocalWorldSize: 1}
	eight := launch.Rank{WorldSize: 8, LocalWorldSize: 8}
	for _, tc := range []struct {
		stage     int
		rk        launch.Rank
		host, dev uint64
		fits      bool
	}{
		{0, one, 1 * gb, 0, true},
		{0, one, 256 << 20, 0, false},
		{0, one, 256 << 20, 1 * gb, true}, // the GPU adds its memory
		{2, eight, 2 * gb, 0, false},      // 8 ranks share 2 GiB: 256 MiB each, all params on each
		{3, eight, 2 * gb, 0, true},       // ZeRO-3: 62 MB each
	} {
		err := checkModelFits(cfg, "gpt2", tc.stage, tc.rk, tc.host, tc.dev)
		if (err == nil) != tc.fits {
			t.Errorf("stage %d, %d local ranks, host %d, device %d: %v, want fits=%v", tc.stage, tc.rk.LocalWorldSize, tc.host, tc.dev, err, tc.fits)
		}
		if err != nil && !strings.Contains(err.Error(), "124,475,904 parameters") {
			t.Errorf("error does not give the count: %v", err)
		}
	}
}

func TestParseMemTotal(t *testing.T) {
	for in, want := range map[string]uint64{
		"MemTotal:       24576000 kB\nMemFree: 1 kB\n": 24576000 << 10,
		"MemFree: 1 kB\nMemTotal: 8 kB\n":              8 << 10,
		"MemTotal: lots\n":                             0,
		"MemTotal: 99999999999999999999 kB\n":          0,
		"":                                             0,
	} {
		got, ok := parseMemTotal(strings.NewReader(in))
		if got != want || ok != (want != 0) {
			t.Errorf("%q: %d %v, want %d", in, got, ok, want)
		}
	}
}
