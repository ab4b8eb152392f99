package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// EnvUpdateGolden, set to 1, makes TestGoldenRuns write the digests it
// computes instead of comparing them: for a change meant to alter the
// numbers, whose commit says why.
const EnvUpdateGolden = "GOTRAIN_UPDATE_GOLDEN"

const goldenFile = "testdata/golden_runs.json"

// goldenRun is one configuration of TestGoldenRuns.
type goldenRun struct {
	name    string
	model   string // "gpt2" or "qwen3": the tiny configs below
	data    string // "tokens" (a token shard) or "rows" (masked {input_ids, labels} rows)
	stage   int
	offload string // "", "optimizer" or "both"
	lora    bool
}

// goldenRuns cover what a refactor of the step, the engines or the model
// can change: both architectures, every ZeRO stage and both offloads, the
// full model and LoRA, token shards and masked rows, always on 2 ranks.
func goldenRuns() []goldenRun {
	var runs []goldenRun
	for _, m := range []string{"gpt2", "qwen3"} {
		for _, z := range []struct {
			stage   int
			offload string
		}{{0, ""}, {1, ""}, {2, ""}, {3, ""}, {2, "optimizer"}, {3, "both"}} {
			runs = append(runs, goldenRun{model: m, data: "tokens", stage: z.stage, offload: z.offload})
		}
		for _, stage := range []int{0, 3} {
			runs = append(runs, goldenRun{model: m, data: "rows", stage: stage})
		}
		for _, z := range []struct {
			stage   int
			offload string
		}{{0, ""}, {2, "optimizer"}, {3, ""}} {
			runs = append(runs, goldenRun{model: m, data: "rows", stage: z.stage, offload: z.offload, lora: true})
		}
	}
	for i := range runs {
		r := &runs[i]
		r.name = fmt.Sprintf("%s-%s-zero%d", r.model, r.data, r.stage)
		if r.offload != "" {
			r.name += "-offload_" + r.offload
		}
		if r.lora {
			r.name += "-lora"
		}
	}
	return runs
}

// goldenDigest is what a run must reproduce: a digest of every metrics
// value but the timing ones, and one per saved tensor file; the first and
// last losses are kept in clear so a changed digest shows how far.
type goldenDigest struct {
	Metrics   string            `json:"metrics"`
	FirstLoss float64           `json:"first_loss"`
	LastLoss  float64           `json:"last_loss"`
	Tensors   map[string]string `json:"tensors"`
}

// TestGoldenRuns: 10 steps of each goldenRuns configuration on 2 CPU ranks
// reproduce, bit for bit, the committed digests of every metrics.jsonl value
// (timings aside) and of every tensor file of the final checkpoint. A
// refactor must leave them unchanged.
func TestGoldenRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	fx := newGoldenFixture(t)
	got := map[string]goldenDigest{}
	for _, r := range goldenRuns() {
		got[r.name] = fx.run(t, r)
	}
	if os.Getenv(EnvUpdateGolden) == "1" {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d runs)", goldenFile, len(got))
		return
	}
	b, err := os.ReadFile(goldenFile)
	if err != nil {
		t.Fatalf("%v (make it with %s=1)", err, EnvUpdateGolden)
	}
	var want map[string]goldenDigest
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		g, w := got[n], want[n]
		if g.Metrics != w.Metrics {
			t.Errorf("%s: metrics differ (loss %.9g → %.9g, golden %.9g → %.9g)", n, g.FirstLoss, g.LastLoss, w.FirstLoss, w.LastLoss)
		}
		if !mapsEqual(g.Tensors, w.Tensors) {
			t.Errorf("%s: saved tensors differ: %v, golden %v", n, g.Tensors, w.Tensors)
		}
	}
	if len(want) != len(got) {
		t.Errorf("%d golden runs committed, %d run", len(want), len(got))
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// goldenFixture holds the inputs every run shares.
type goldenFixture struct {
	dir                  string
	gpt2, qwen3          string // config.json paths
	tokens, rows, valRow string // data globs
}

func newGoldenFixture(t *testing.T) *goldenFixture {
	dir, gpt2, shard := distFixture(t)
	fx := &goldenFixture{dir: dir, gpt2: gpt2, tokens: shard}
	fx.qwen3 = filepath.Join(dir, "qwen3", "config.json")
	writeFile(t, fx.qwen3, `{"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 32,
		"intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
		"head_dim": 8, "max_position_embeddings": 64, "vocab_size": 64, "rms_norm_eps": 1e-6,
		"rope_theta": 10000, "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2}`)
	// Rows of 9-16 ids whose first 3-6 are a prompt (no loss).
	var b strings.Builder
	for i := range 48 {
		n, p := 9+i%8, 3+i%4
		ids, labels := make([]int, n), make([]int, n)
		for j := range ids {
			ids[j] = 3 + (i*7+j*j)%60
			labels[j] = ids[j]
			if j < p {
				labels[j] = -100
			}
		}
		fmt.Fprintf(&b, `{"input_ids": %s, "labels": %s}`+"\n", jsonInts(ids), jsonInts(labels))
	}
	rows := filepath.Join(dir, "rows.jsonl")
	writeFile(t, rows, b.String())
	out := filepath.Join(dir, "rows")
	if _, stderr, err := run(t, "data", "prepare", "--input", rows, "--tokenizer", "none", "--output", out,
		"--val-fraction", "0.1", "--quiet"); err != nil {
		t.Fatalf("data prepare: %v\n%s", err, stderr)
	}
	fx.rows, fx.valRow = filepath.Join(out, "train_*.bin"), filepath.Join(out, "val_*.bin")
	return fx
}

func jsonInts(v []int) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goldenConfig is a DeepSpeed config for r: micro-batch 2, accumulation 2,
// AdamW with warmup, clipping, the stage and its offloads.
func (fx *goldenFixture) config(t *testing.T, r goldenRun) string {
	off := ""
	switch r.offload {
	case "optimizer":
		off = `, "offload_optimizer": {"device": "cpu"}`
	case "both":
		off = `, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}`
	}
	path := filepath.Join(fx.dir, r.name+".json")
	writeFile(t, path, fmt.Sprintf(`{
		"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, "gradient_clipping": 1.0,
		"optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
		"scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.01, "warmup_num_steps": 3}},
		"zero_optimization": {"stage": %d%s}
	}`, r.stage, off))
	return path
}

// run trains r for 10 steps on 2 ranks, saving the last step, and digests
// its metrics and checkpoint.
func (fx *goldenFixture) run(t *testing.T, r goldenRun) goldenDigest {
	t.Helper()
	out := filepath.Join(fx.dir, "out", r.name)
	model := fx.gpt2
	if r.model == "qwen3" {
		model = fx.qwen3
	}
	data, val, seq := fx.tokens, "", "16"
	if r.data == "rows" {
		data, val, seq = fx.rows, fx.valRow, "16"
	}
	args := []string{"launch", "--nproc", "2", "--master_port", "0", "train", "--config", fx.config(t, r), "--model", model,
		"--data", data, "--seq-len", seq, "--max-steps", "10", "--save-every", "10", "--seed", "7", "--output-dir", out,
		"--threads", "1", "--metrics-addr", "off", "--peak-flops", "1e9", "--resume", "never"}
	if val != "" {
		args = append(args, "--val-data", val, "--eval-every", "5")
	}
	if r.lora {
		args = append(args, "--lora-r", "4", "--lora-alpha", "8", "--lora-target", "all-linear")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := gotrainCmd(ctx, args...)
	// The Go GEMM on every machine: auto picks by measurement, and OpenBLAS
	// would give other bits where it wins.
	cmd.Env = append(cmd.Env, "GOTRAIN_BLAS=go")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: gotrain %s: %v\n%s", r.name, strings.Join(args, " "), err, b)
	}
	d := goldenDigest{Tensors: map[string]string{}}
	d.Metrics, d.FirstLoss, d.LastLoss = digestMetrics(t, filepath.Join(out, "metrics.jsonl"))
	ck := filepath.Join(out, "checkpoints", "global_step10")
	err := filepath.WalkDir(ck, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".safetensors") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(ck, p)
		d.Tensors[rel] = hex.EncodeToString(sum[:12])
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", r.name, err)
	}
	if len(d.Tensors) == 0 {
		t.Fatalf("%s: no tensor files under %s", r.name, ck)
	}
	return d
}

// timingKeys are the metrics.jsonl keys that depend on the machine's speed
// (withoutPeaks drops the memory entries that depend on timing).
var timingKeys = []string{"tokens_per_second", "mfu", "step_seconds", "forward_seconds", "backward_seconds", "optimizer_seconds", "comm_seconds"}

// digestMetrics hashes every line's values but the timing ones, keys
// sorted, numbers as written.
func digestMetrics(t *testing.T, path string) (digest string, first, last float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	steps := 0
	for sc.Scan() {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		keys := make([]string, 0, len(rec))
		for k := range rec {
			if !slices.Contains(timingKeys, k) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := rec[k]
			if k == "memory" {
				v = withoutPeaks(t, v)
			}
			fmt.Fprintf(h, "%s=%s;", k, v)
		}
		h.Write([]byte{'\n'})
		var loss float64
		if l, ok := rec["loss"]; ok && json.Unmarshal(l, &loss) == nil {
			if steps == 0 {
				first = loss
			}
			last = loss
			steps++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if steps != 10 {
		t.Fatalf("%s: %d step records, want 10", path, steps)
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), first, last
}

// withoutPeaks drops from a metrics memory value what depends on timing:
// each rank's "peak" entry and the "comm" category (stage 3 stages a
// gathered group in buffers whose number depends on how far the prefetch
// has run when the line is written).
func withoutPeaks(t *testing.T, v json.RawMessage) json.RawMessage {
	var ranks []map[string]map[string]int64
	if err := json.Unmarshal(v, &ranks); err != nil {
		t.Fatalf("memory %s: %v", v, err)
	}
	for _, r := range ranks {
		delete(r, "peak")
		for _, pool := range r {
			delete(pool, "comm")
		}
	}
	b, err := json.Marshal(ranks)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
