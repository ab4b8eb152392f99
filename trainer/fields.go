package trainer

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/data"
)

// Field is one setting every rank of a job must agree on, and that a
// resumed run compares with the checkpoint it continues (which stores
// them). Values are short and human readable, so a mismatch can be shown as
// it is: Name "config.optimizer.params.lr", Value "0.0006". Math marks a
// setting whose change alters what training computes (learning rate,
// schedule, batch sizes, precision, the model): resuming with a different
// value needs --allow-config-change. A change of the others (ZeRO stage,
// world size alone, output cadence) is reported only.
type Field = checkpoint.Field

// RunFields lists what must agree between the ranks of the run o describes:
// every resolved DeepSpeed key, the resolved batch sizes, the model, the
// sequence length and run length, the data files with their sizes, the
// output directory and gotrain's version, plus extra (the device, say).
// The order is fixed, so two lists compare position by position.
func RunFields(o Options, extra ...Field) ([]Field, error) {
	if o.Config == nil {
		return nil, fmt.Errorf("trainer: no config")
	}
	var fs []Field
	add := func(name, value string, math bool) { fs = append(fs, Field{Name: name, Value: value, Math: math}) }
	add("version", o.Version, false)
	for _, kv := range o.Config.Values() {
		add("config."+kv.Path, kv.Value, mathKey(kv.Path))
	}
	b := o.Batch
	add("batch.micro", strconv.Itoa(b.MicroBatch), true)
	add("batch.gradient_accumulation", strconv.Itoa(b.GradAccum), true)
	add("batch.train_batch_size", strconv.Itoa(b.TrainBatchSize), true)
	add("world_size", strconv.Itoa(b.WorldSize), false)
	add("model", checkpoint.ModelConfigOf(o.Model).String(), true)
	add("seq_len", strconv.Itoa(o.SeqLen), true)
	add("max_steps", strconv.Itoa(o.MaxSteps), false)
	add("seed", strconv.FormatUint(o.Seed, 10), false)
	add("shuffle", strconv.FormatBool(o.Shuffle), false)
	add("pack", strconv.FormatBool(o.Pack), true)
	add("activation_checkpointing", fmt.Sprintf("%t (host %t)", o.Checkpoint, o.CheckpointHost), false)
	d := "supplied by the caller"
	if o.Batches == nil {
		var err error
		if d, err = filesField(o.Data); err != nil {
			return nil, fmt.Errorf("--data: %w", err)
		}
	}
	add("data", d, false)
	if len(o.ValData) > 0 {
		var err error
		if d, err = filesField(o.ValData); err != nil {
			return nil, fmt.Errorf("--val-data: %w", err)
		}
		add("val_data", d, false)
	}
	evalBatches := "all batches"
	if o.EvalBatches > 0 {
		evalBatches = fmt.Sprintf("at most %d batches", o.EvalBatches)
	}
	add("eval", fmt.Sprintf("every %d steps; %d samples per rank and batch; %s", o.EvalEvery, o.EvalBatchSize, evalBatches), false)
	add("output_dir", filepath.Clean(o.OutputDir), false)
	add("save", fmt.Sprintf("every %d steps, keep %d", o.SaveEvery, o.SaveTotalLimit), false)
	if o.InitFrom != "" {
		add("init_from", o.InitFrom, false)
	}
	fs = append(fs, stageFields(o.Stage)...)
	return append(fs, extra...), nil
}

// mathKey reports whether a DeepSpeed key changes what training computes.
func mathKey(path string) bool {
	for _, p := range []string{"optimizer", "scheduler", "gradient_clipping", "train_batch_size",
		"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "bf16", "fp16", "amp",
		"data_types", "prescale_gradients", "gradient_predivide_factor", "curriculum_learning"} {
		if path == p || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// filesField summarises resolved shard files: how many, their total size,
// and a digest of every path with its size.
func filesField(patterns []string) (string, error) {
	paths, err := data.ResolveShards(patterns)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	var total int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return "", err
		}
		total += st.Size()
		fmt.Fprintf(h, "%s\x00%d\n", p, st.Size())
	}
	return fmt.Sprintf("%d files, %d bytes, sha256 %s", len(paths), total, hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// DiffFields lists the fields that differ between two lists (by name: a
// field present on one side only differs too), in a's order, then b's extras.
func DiffFields(a, b []Field) []FieldDiff {
	bm := make(map[string]Field, len(b))
	for _, f := range b {
		bm[f.Name] = f
	}
	seen := make(map[string]bool, len(a))
	var out []FieldDiff
	for _, f := range a {
		seen[f.Name] = true
		g, ok := bm[f.Name]
		switch {
		case !ok:
			out = append(out, FieldDiff{Name: f.Name, A: f.Value, B: "(absent)", Math: f.Math})
		case g.Value != f.Value:
			out = append(out, FieldDiff{Name: f.Name, A: f.Value, B: g.Value, Math: f.Math || g.Math})
		}
	}
	for _, g := range b {
		if !seen[g.Name] {
			out = append(out, FieldDiff{Name: g.Name, A: "(absent)", B: g.Value, Math: g.Math})
		}
	}
	return out
}

// FieldDiff is one field whose values differ.
type FieldDiff struct {
	Name string
	A, B string
	Math bool
}

func (d FieldDiff) String() string { return fmt.Sprintf("%s: %s ≠ %s", d.Name, d.A, d.B) }
