package trainer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/optim"
)

// trainerState is the loop's own state in a checkpoint, beside the
// engine's tensors: what a resumed run needs to continue bit for bit.
type trainerState struct {
	Updates   int                    `json:"updates"` // successful AdamW updates (bias correction)
	Skipped   int                    `json:"skipped"` // fp16 overflow steps
	Scheduler optim.SchedulerState   `json:"scheduler"`
	Scaler    *optim.LossScalerState `json:"loss_scaler,omitempty"`
	Data      data.LoaderState       `json:"data"`            // every rank's loader moves in step; the rank offset is positional
	Stage     *stageState            `json:"stage,omitempty"` // the curriculum stage (--stages) the step belongs to
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
	// What sits beside the tag (a LoRA run's PEFT adapter directory) is
	// refreshed first.
	if _, err := r.tr.save(false); err != nil {
		return err
	}
	dir := checkpoint.Dir(r.o.OutputDir)
	if r.rank == 0 {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if err := r.barrier(ctx)(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	w, err := checkpoint.NewTagWriter(dir, checkpoint.TagName(int64(step)), r.tr.layout(), checkpoint.AllKinds(),
		checkpoint.WriterOptions{Rank: r.rank, World: r.world, Barrier: r.barrier(ctx), SaveTotalLimit: r.o.SaveTotalLimit})
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	err = r.eng.ExportState(func(kind string, off int, vals []float32) error {
		return w.WriteRange(checkpoint.Kind(kind), off, vals)
	})
	if err != nil {
		return w.Abort(fmt.Errorf("checkpoint: %w", err))
	}
	meta, err := r.tagMetadata(step, tokens)
	if err != nil {
		return w.Abort(err)
	}
	if err := w.Finish(meta); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	r.lastSaved = step
	// The logs are durable up to the state a resume would start from.
	if err := r.logs.sync(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	fmt.Fprintf(r.o.Log, "saved checkpoint %s%s in %.2fs\n", filepath.Join(dir, checkpoint.TagName(int64(step))), r.stageNote(step), time.Since(t0).Seconds())
	if ob, ok := r.o.Observer.(interface{ ObserveCheckpoint(float64) }); ok {
		ob.ObserveCheckpoint(time.Since(t0).Seconds())
	}
	return nil
}

// sweepPartialSaves removes the partial tags of saves that failed or were
// killed in this output directory, saying what each held: on a full disk
// they hold the space this run's saves need. Only under the output lock.
func sweepPartialSaves(o Options) error {
	swept, err := checkpoint.SweepPartial(checkpoint.Dir(o.OutputDir))
	for _, s := range swept {
		if s.Kept != "" {
			fmt.Fprintf(o.Log, "note: kept %s: %s\n", s.Path, s.Kept)
			continue
		}
		fmt.Fprintf(o.Log, "note: removed %s, the partial checkpoint of a save that failed or was killed (%s freed)\n", s.Path, metrics.HumanBytes(s.Bytes))
	}
	return err
}

// openResume opens the checkpoint this run continues from (nil: a fresh
// start), as --resume and --overwrite say (checkpoint.OpenForResume).
// Every rank decides alike from the same files; rank 0 alone moves an
// earlier run aside and speaks.
func (r *run) openResume() (*checkpoint.Reader, error) {
	return checkpoint.OpenForResume(checkpoint.ResumeOptions{
		OutputDir: r.o.OutputDir, Resume: r.o.Resume, Overwrite: r.o.Overwrite, MoveAside: r.rank == 0,
		Log: func(format string, args ...any) { fmt.Fprintf(r.o.Log, format, args...) },
	})
}

// newRunID names a fresh run's checkpoint lineage.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// checkConfig lists, on rank 0 and before step 1, every setting that
// differs from the checkpoint's, and refuses a difference that changes what
// training computes unless AllowConfigChange. Checkpoints that predate the
// stored settings are compared on what their meta.json has.
func (r *run) checkConfig(ck *checkpoint.Reader, pos data.LoaderState) error {
	meta := ck.Meta()
	stored, now := meta.Fields, r.fields
	partial := len(stored) == 0
	if partial {
		stored, now = meta.LegacyFields(), r.currentMeta().LegacyFields()
		fmt.Fprintf(r.o.Log, "warning: checkpoint %s predates the settings gotrain stores with a checkpoint: compared model, precision, batch size, world size and ZeRO stage only; learning rate, schedule, data and the rest could not be checked\n", ck.Tag())
	}
	diffs := DiffFields(stored, now)
	if len(diffs) == 0 {
		return nil
	}
	split := r.sameSteps(diffs, pos, partial)
	var math []string
	layoutMath := false
	fmt.Fprintf(r.o.Log, "resuming %s with settings that differ from the checkpoint's:\n", ck.Tag())
	for _, d := range diffs {
		note := ""
		if r.entering && slices.Contains(stageOwned, d.Name) {
			d.Math, note = false, "   (the new stage's)"
		}
		if layoutField(d.Name) {
			if split == nil {
				d.Math, note = false, "   (the same samples per step, in the same order)"
			} else if d.Math {
				layoutMath = true
			}
		}
		if d.Math {
			note = "   (changes the math)"
			math = append(math, fmt.Sprintf("%s %s → %s", d.Name, d.A, d.B))
		}
		fmt.Fprintf(r.o.Log, "  %s: %s → %s%s\n", d.Name, d.A, d.B, note)
	}
	why := ""
	if layoutMath {
		fmt.Fprintf(r.o.Log, "  the new batch layout takes other samples per step: %v\n", split)
		why = fmt.Sprintf(" (the new batch layout takes other samples per step: %v)", split)
	}
	if len(math) > 0 && !r.o.AllowConfigChange {
		return fmt.Errorf("--resume %s: these settings differ from the checkpoint's and change what training computes: %s%s; restore them, or pass --allow-config-change to continue with the new values",
			ck.Tag(), strings.Join(math, "; "), why)
	}
	return nil
}

// currentMeta is what this run would record in the fields a legacy
// checkpoint has.
func (r *run) currentMeta() checkpoint.Metadata {
	return checkpoint.Metadata{Step: 1, Samples: int64(r.o.Batch.TrainBatchSize), WorldSize: r.world,
		Stage: r.o.Config.ZeRO.Stage, Precision: r.paramDType.String(), Model: checkpoint.ModelConfigOf(r.o.Model)}
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
	if newer := checkpoint.TagsAfter(checkpoint.Dir(r.o.OutputDir), ck.Meta().Step); len(newer) > 0 {
		fmt.Fprintf(r.o.Log, "warning: %s holds checkpoints beyond the resumed step %d (%s): retention never deletes them, but this run replaces any it saves again, and %q will name this run's saves\n",
			checkpoint.Dir(r.o.OutputDir), ck.Meta().Step, strings.Join(newer, ", "), checkpoint.LatestFile)
	}
}

// restore loads a checkpoint into the trainee and the loop's state (src:
// the --init-from weights of what the checkpoint does not hold); the
// world size and ZeRO stage may differ from the run that wrote it.
func (r *run) restore(ck *checkpoint.Reader, src model.WeightSource) (startStep int, tokens int64, err error) {
	if err := ck.Verify(); err != nil {
		return 0, 0, err
	}
	for _, w := range ck.Warnings() {
		fmt.Fprintln(r.o.Log, "warning: "+w)
	}
	if err := r.tr.check(ck); err != nil {
		return 0, 0, err
	}
	meta := ck.Meta()
	var ts trainerState
	if err := json.Unmarshal(meta.DataPosition, &ts); err != nil {
		return 0, 0, fmt.Errorf("--resume %s: trainer state: %w", ck.Tag(), err)
	}
	if r.entering, err = r.enteringStage(ck.Tag(), int(meta.Step), ts.Stage); err != nil {
		return 0, 0, err
	}
	if err := r.checkConfig(ck, ts.Data); err != nil {
		return 0, 0, err
	}
	if err := r.tr.restore(ck, src); err != nil {
		return 0, 0, err
	}
	if err := r.opt.restore(ts); err != nil {
		return 0, 0, fmt.Errorf("--resume %s: %w", ck.Tag(), err)
	}
	// A stage entered from the previous one's final checkpoint reads its
	// own data from the start; only the optimizer and the schedule carry on.
	if !r.entering {
		if err := r.restoreData(ts.Data); err != nil {
			return 0, 0, fmt.Errorf("--resume %s: %w", ck.Tag(), err)
		}
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

// restoreData moves the loader to a checkpoint's data position; a run on
// another world size or batch carries the position over in tokens. A run
// fed by Options.Batches has no position to restore.
func (r *run) restoreData(pos data.LoaderState) error {
	if r.loader == nil {
		return nil
	}
	if pos.GroupTokens != 0 && pos.GroupTokens != r.loader.GroupTokens() {
		pos.Group = pos.Group * pos.GroupTokens / r.loader.GroupTokens()
		pos.GroupTokens = r.loader.GroupTokens()
	}
	return r.loader.Restore(pos)
}

// tagMetadata is meta.json of the tag saved at step: the trainer state a
// resume needs (updates, scheduler, loss scaler, data position, stage) and
// what inspect and a resume check against (model, precision, run fields).
func (r *run) tagMetadata(step int, tokens int64) (checkpoint.Metadata, error) {
	ts := trainerState{Stage: r.stageState()}
	r.opt.save(&ts)
	if r.loader != nil {
		ts.Data = r.loader.Save()
	}
	raw, err := json.Marshal(ts)
	if err != nil {
		return checkpoint.Metadata{}, err
	}
	meta := checkpoint.Metadata{
		Step: int64(step), Samples: int64(step) * int64(r.o.Batch.TrainBatchSize), Tokens: tokens,
		WorldSize: r.world, Stage: r.o.Config.ZeRO.Stage, Precision: r.paramDType.String(),
		Model: checkpoint.ModelConfigOf(r.o.Model), Seed: r.o.Seed, DataPosition: raw,
		RunID: r.runID, Fields: r.fields,
	}
	r.tr.describe(&meta)
	// The scheduler and loss-scaler states also sit under DeepSpeed's own
	// key names, for people reading meta.json; the resume reads them from
	// the trainer state above.
	if meta.Scheduler, err = json.Marshal(ts.Scheduler); err != nil {
		return checkpoint.Metadata{}, err
	}
	if ts.Scaler != nil {
		if meta.LossScaler, err = json.Marshal(ts.Scaler); err != nil {
			return checkpoint.Metadata{}, err
		}
	}
	if r.o.ConfigText != "" {
		meta.DeepSpeedConfig = r.o.ConfigText
	}
	return meta, nil
}
