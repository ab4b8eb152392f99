package trainer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/optim"
)

// trainerState is the loop's own state in a checkpoint, beside the
// engine's tensors: what a resumed run needs to continue bit for bit.
type trainerState struct {
	Updates   int                    `json:"updates"` // successful AdamW updates (bias correction)
	Skipped   int                    `json:"skipped"` // fp16 overflow steps
	Scheduler optim.SchedulerState   `json:"scheduler"`
	Scaler    *optim.LossScalerState `json:"loss_scaler,omitempty"`
	Data      data.LoaderState       `json:"data"` // every rank's loader moves in step; the rank offset is positional
}

// barrier is the checkpoint writer's barrier over the engine's Comm.
func (r *run) barrier(ctx context.Context) func() error {
	return func() error {
		return r.eng.Collective(ctx, "checkpoint barrier", func(ctx context.Context, c comm.Comm) error {
			return c.Barrier(ctx)
		})
	}
}

// save writes checkpoint tag global_step<step> under <output-dir>/checkpoints:
// every rank writes the ranges of master weights and moments it owns.
func (r *run) save(ctx context.Context, step int, tokens int64) error {
	if r.o.OutputDir == "" {
		return nil
	}
	t0 := time.Now()
	dir := checkpoint.Dir(r.o.OutputDir)
	if r.rank == 0 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if err := r.barrier(ctx)(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	w, err := checkpoint.NewTagWriter(dir, checkpoint.TagName(int64(step)), r.m.Layout(), checkpoint.AllKinds(),
		checkpoint.WriterOptions{Rank: r.rank, World: r.world, Barrier: r.barrier(ctx), SaveTotalLimit: r.o.SaveTotalLimit})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	err = r.eng.ExportState(func(kind string, off int, vals []float32) error {
		return w.WriteRange(checkpoint.Kind(kind), off, vals)
	})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	ts := trainerState{Updates: r.updates, Skipped: r.skipped, Scheduler: r.sch.State(), Data: r.train.Save()}
	if r.scaler != nil {
		st := r.scaler.State()
		ts.Scaler = &st
	}
	raw, err := json.Marshal(ts)
	if err != nil {
		return err
	}
	pdt, _, _ := precision(r.o.Config)
	meta := checkpoint.Metadata{
		Step: int64(step), Samples: int64(step) * int64(r.o.Batch.TrainBatchSize), Tokens: tokens,
		WorldSize: r.world, Stage: r.o.Config.ZeRO.Stage, Precision: pdt.String(),
		Model: checkpoint.ModelConfigOf(r.o.Model), Seed: r.o.Seed, DataPosition: raw,
		RunID: r.runID, Fields: storedFields(r.fields),
	}
	// The scheduler and loss-scaler states also sit under DeepSpeed's own
	// key names, for people reading meta.json; the resume reads them from
	// the trainer state above.
	if meta.Scheduler, err = json.Marshal(ts.Scheduler); err != nil {
		return err
	}
	if ts.Scaler != nil {
		if meta.LossScaler, err = json.Marshal(ts.Scaler); err != nil {
			return err
		}
	}
	if r.o.ConfigText != "" {
		meta.DeepSpeedConfig = r.o.ConfigText
	}
	if err := w.Finish(meta); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	r.lastSaved = step
	// The logs are durable up to the state a resume would start from.
	if r.log != nil {
		if err := r.log.Sync(); err != nil {
			return err
		}
	}
	if err := r.monitors.Sync(); err != nil {
		return fmt.Errorf("checkpoint: monitor: %w", err)
	}
	fmt.Fprintf(r.o.Log, "saved checkpoint %s in %.2fs\n", filepath.Join(dir, checkpoint.TagName(int64(step))), time.Since(t0).Seconds())
	if ob, ok := r.o.Observer.(interface{ ObserveCheckpoint(float64) }); ok {
		ob.ObserveCheckpoint(time.Since(t0).Seconds())
	}
	return nil
}

// openResume decides where the run starts, from --resume and what the
// output directory holds, and opens the checkpoint to continue from (nil:
// a fresh start). Every rank decides alike from the same files; rank 0
// alone moves an earlier run aside and speaks.
//
//   - "" or "never": a fresh start. A checkpoints directory with tags is
//     refused (it would mix two runs and let retention delete the earlier
//     one), unless Overwrite moves it aside.
//   - "auto": the tag "latest" names; without "latest", the newest tag that
//     verifies; with no tags at all, a fresh start (a requeued job's first
//     submission).
//   - anything else: a checkpoints directory (its "latest") or one tag
//     directory.
func (r *run) openResume() (*checkpoint.Reader, error) {
	o := r.o
	dir := checkpoint.Dir(o.OutputDir)
	if o.Overwrite && o.Resume != "" && o.Resume != "never" {
		return nil, fmt.Errorf("--overwrite starts afresh and cannot be combined with --resume %s; drop one of them", o.Resume)
	}
	switch o.Resume {
	case "", "never":
		if o.OutputDir == "" {
			return nil, nil
		}
		has, err := checkpoint.HasTags(dir)
		if err != nil || !has {
			return nil, err
		}
		if !o.Overwrite {
			return nil, fmt.Errorf("%s already holds checkpoints (%s); pass --resume auto to continue that run, or --overwrite to start afresh (the old checkpoints are moved aside, not deleted)",
				dir, tagSummary(dir))
		}
		if r.rank == 0 {
			moved, err := checkpoint.MoveAside(dir, time.Now())
			if err != nil {
				return nil, fmt.Errorf("--overwrite: %w", err)
			}
			fmt.Fprintf(o.Log, "--overwrite: moved the previous checkpoints to %s\n", moved)
		}
		return nil, nil
	case "auto":
		if o.OutputDir == "" {
			return nil, fmt.Errorf("--resume auto needs --output-dir (its checkpoints directory is where it looks)")
		}
		has, err := checkpoint.HasTags(dir)
		if err != nil {
			return nil, err
		}
		if !has {
			fmt.Fprintf(o.Log, "--resume auto: no checkpoint in %s yet; starting at step 1\n", dir)
			return nil, nil
		}
		// A tag "latest" names is resumed from, or refused if it is damaged
		// (the error names the previous complete tag). Without a usable
		// "latest" — missing, unreadable, or naming a tag that is not there
		// (a save cut between renames on a file system without exchange) —
		// the newest tag that verifies is taken, and the output says so.
		why := fmt.Sprintf("%s has no %q file", dir, checkpoint.LatestFile)
		switch tag, ok, err := checkpoint.Latest(dir); {
		case err != nil:
			why = err.Error()
		case ok:
			if _, err := os.Stat(filepath.Join(dir, tag)); err == nil {
				return checkpoint.Open(dir, "")
			}
			why = fmt.Sprintf("%s names %s, which is not in %s", checkpoint.LatestFile, tag, dir)
		}
		ck, skipped, err := checkpoint.OpenNewestVerified(dir)
		if err != nil {
			return nil, fmt.Errorf("%s, and %w; pass --resume with a tag directory to choose, or --overwrite to start afresh", why, err)
		}
		fmt.Fprintf(o.Log, "--resume auto: %s; resuming from %s, the newest checkpoint that verifies\n", why, ck.Tag())
		for _, s := range skipped {
			fmt.Fprintf(o.Log, "  skipped %s\n", s)
		}
		return ck, nil
	}
	if st, err := os.Stat(o.Resume); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: pass auto, never, a checkpoints directory (e.g. out/checkpoints) or a tag directory (e.g. out/checkpoints/%s)",
			o.Resume, checkpoint.TagName(100))
	}
	if _, err := os.Stat(filepath.Join(o.Resume, checkpoint.MetaFile)); err == nil {
		return checkpoint.Open(filepath.Dir(o.Resume), filepath.Base(o.Resume))
	}
	return checkpoint.Open(o.Resume, "")
}

// tagSummary names the tags in a checkpoints directory for a message.
func tagSummary(dir string) string {
	tags, err := checkpoint.List(dir)
	if err != nil || len(tags) == 0 {
		return "tags of an earlier run"
	}
	names := make([]string, 0, len(tags))
	for _, t := range tags {
		names = append(names, t.Tag)
	}
	if len(names) > 6 {
		names = append(names[:2], fmt.Sprintf("… %d more …", len(names)-4), names[len(names)-2], names[len(names)-1])
	}
	return strings.Join(names, ", ")
}

// newRunID names a fresh run's checkpoint lineage.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storedFields converts the run's fields for meta.json.
func storedFields(fs []Field) []checkpoint.Field {
	out := make([]checkpoint.Field, len(fs))
	for i, f := range fs {
		out[i] = checkpoint.Field{Name: f.Name, Value: f.Value, Math: f.Math}
	}
	return out
}

// checkConfig lists, on rank 0 and before step 1, every setting that
// differs from the checkpoint's, and refuses a difference that changes what
// training computes unless AllowConfigChange. Checkpoints that predate the
// stored settings are compared on what their meta.json has.
func (r *run) checkConfig(ck *checkpoint.Reader) error {
	meta := ck.Meta()
	var stored []Field
	partial := len(meta.Fields) == 0
	for _, f := range meta.Fields {
		stored = append(stored, Field{Name: f.Name, Value: f.Value, Math: f.Math})
	}
	now := r.fields
	if partial {
		stored, now = legacyFields(meta), legacyFields(r.currentMeta())
		fmt.Fprintf(r.o.Log, "warning: checkpoint %s predates the settings gotrain stores with a checkpoint: compared model, precision, batch size, world size and ZeRO stage only; learning rate, schedule, data and the rest could not be checked\n", ck.Tag())
	}
	diffs := DiffFields(stored, now)
	if len(diffs) == 0 {
		return nil
	}
	var math []string
	fmt.Fprintf(r.o.Log, "resuming %s with settings that differ from the checkpoint's:\n", ck.Tag())
	for _, d := range diffs {
		note := ""
		if d.Math {
			note = "   (changes the math)"
			math = append(math, fmt.Sprintf("%s %s → %s", d.Name, d.A, d.B))
		}
		fmt.Fprintf(r.o.Log, "  %s: %s → %s%s\n", d.Name, d.A, d.B, note)
	}
	if len(math) > 0 && !r.o.AllowConfigChange {
		return fmt.Errorf("--resume %s: these settings differ from the checkpoint's and change what training computes: %s; restore them, or pass --allow-config-change to continue with the new values",
			ck.Tag(), strings.Join(math, "; "))
	}
	return nil
}

// currentMeta is what this run would record in the fields a legacy
// checkpoint has.
func (r *run) currentMeta() checkpoint.Metadata {
	pdt, _, _ := precision(r.o.Config)
	return checkpoint.Metadata{Step: 1, Samples: int64(r.o.Batch.TrainBatchSize), WorldSize: r.world,
		Stage: r.o.Config.ZeRO.Stage, Precision: pdt.String(), Model: checkpoint.ModelConfigOf(r.o.Model)}
}

// legacyFields are the comparable settings of a meta.json without stored
// fields; the train batch size is what it sampled per step.
func legacyFields(m checkpoint.Metadata) []Field {
	c := m.Model
	fs := []Field{
		{Name: "model", Value: fmt.Sprintf("n_layer %d, n_head %d, n_embd %d, n_positions %d, vocab_size %d (padded %d)",
			c.NLayer, c.NHead, c.NEmbd, c.NPositions, c.VocabSize, c.PaddedVocab), Math: true},
		{Name: "precision", Value: m.Precision, Math: true},
		{Name: "world_size", Value: strconv.Itoa(m.WorldSize)},
		{Name: "config.zero_optimization.stage", Value: strconv.Itoa(m.Stage)},
	}
	if m.Step > 0 {
		fs = append(fs, Field{Name: "batch.train_batch_size", Value: strconv.FormatInt(m.Samples/m.Step, 10), Math: true})
	}
	return fs
}

// sameDir reports whether two paths name one directory.
func sameDir(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}

// warnNewerTags says when the output directory holds tags beyond the
// resumed step (a resume from an older tag): they are kept, but a save of
// the same step replaces one, and "latest" will name this run's saves.
func (r *run) warnNewerTags(ck *checkpoint.Reader) {
	if r.o.OutputDir == "" {
		return
	}
	tags, err := checkpoint.List(checkpoint.Dir(r.o.OutputDir))
	if err != nil {
		return
	}
	var newer []string
	for _, t := range tags {
		if t.Step > ck.Meta().Step {
			newer = append(newer, t.Tag)
		}
	}
	if len(newer) > 0 {
		fmt.Fprintf(r.o.Log, "warning: %s holds checkpoints beyond the resumed step %d (%s): retention never deletes them, but this run replaces any it saves again, and %q will name this run's saves\n",
			checkpoint.Dir(r.o.OutputDir), ck.Meta().Step, strings.Join(newer, ", "), checkpoint.LatestFile)
	}
}

// restore loads a checkpoint into the engine and the loop's state; the
// world size and ZeRO stage may differ from the run that wrote it.
func (r *run) restore(ck *checkpoint.Reader) (startStep int, tokens int64, err error) {
	if err := ck.Verify(); err != nil {
		return 0, 0, err
	}
	for _, w := range ck.Warnings() {
		fmt.Fprintln(r.o.Log, "warning: "+w)
	}
	if err := ck.CheckModel(r.m.Layout()); err != nil {
		return 0, 0, fmt.Errorf("--resume: %w (the checkpoint was written for another model; pass the same --model)", err)
	}
	if err := r.checkConfig(ck); err != nil {
		return 0, 0, err
	}
	err = r.eng.RestoreState(func(kind string, off, n int) ([]float32, error) {
		return ck.ReadRange(checkpoint.Kind(kind), off, n)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("--resume %s: %w", ck.Tag(), err)
	}
	meta := ck.Meta()
	var ts trainerState
	if err := json.Unmarshal(meta.DataPosition, &ts); err != nil {
		return 0, 0, fmt.Errorf("--resume %s: trainer state: %w", ck.Tag(), err)
	}
	r.updates, r.skipped = ts.Updates, ts.Skipped
	if err := r.sch.Restore(ts.Scheduler); err != nil {
		return 0, 0, fmt.Errorf("--resume %s: scheduler: %w", ck.Tag(), err)
	}
	if r.scaler != nil && ts.Scaler != nil {
		if err := r.scaler.Restore(*ts.Scaler); err != nil {
			return 0, 0, fmt.Errorf("--resume %s: loss scaler: %w", ck.Tag(), err)
		}
	}
	pos := ts.Data
	if pos.GroupTokens != 0 && pos.GroupTokens != r.train.GroupTokens() {
		// Another world size or batch: carry the position over in tokens.
		pos.Group = pos.Group * pos.GroupTokens / r.train.GroupTokens()
		pos.GroupTokens = r.train.GroupTokens()
	}
	if err := r.train.Restore(pos); err != nil {
		return 0, 0, fmt.Errorf("--resume %s: %w", ck.Tag(), err)
	}
	r.runID = meta.RunID
	if r.runID == "" {
		r.runID = newRunID()
		fmt.Fprintf(r.o.Log, "note: checkpoint %s records no run id; this run's checkpoints start lineage %s, and save_total_limit never deletes the older tags\n", ck.Tag(), r.runID)
	}
	if same, _ := sameDir(ck.Dir(), checkpoint.Dir(r.o.OutputDir)); same {
		r.lastSaved = int(meta.Step)
	}
	r.warnNewerTags(ck)
	fmt.Fprintf(r.o.Log, "resumed from %s (step %d, written by %d rank(s) at ZeRO stage %d)\n",
		ck.Tag(), meta.Step, meta.WorldSize, meta.Stage)
	return int(meta.Step) + 1, meta.Tokens, nil
}
