package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	fmt.Fprintf(r.o.Log, "saved checkpoint %s in %.2fs\n", filepath.Join(dir, checkpoint.TagName(int64(step))), time.Since(t0).Seconds())
	if ob, ok := r.o.Observer.(interface{ ObserveCheckpoint(float64) }); ok {
		ob.ObserveCheckpoint(time.Since(t0).Seconds())
	}
	return nil
}

// resumeReader opens the checkpoint --resume names: "never" none, "auto" the
// latest under <output-dir>/checkpoints if any, else a checkpoints directory
// or one tag directory.
func resumeReader(o Options) (*checkpoint.Reader, error) {
	switch o.Resume {
	case "never":
		return nil, nil
	case "", "auto":
		if o.OutputDir == "" {
			return nil, nil
		}
		dir := checkpoint.Dir(o.OutputDir)
		if _, err := os.Stat(filepath.Join(dir, checkpoint.LatestFile)); errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return checkpoint.Open(dir, "")
	}
	if _, err := os.Stat(filepath.Join(o.Resume, checkpoint.MetaFile)); err == nil {
		return checkpoint.Open(filepath.Dir(o.Resume), filepath.Base(o.Resume))
	}
	return checkpoint.Open(o.Resume, "")
}

// restore loads a checkpoint into the engine and the loop's state; the
// world size and ZeRO stage may differ from the run that wrote it.
func (r *run) restore(ck *checkpoint.Reader) (startStep int, tokens int64, err error) {
	if err := ck.Verify(); err != nil {
		return 0, 0, err
	}
	if err := ck.CheckModel(r.m.Layout()); err != nil {
		return 0, 0, fmt.Errorf("--resume: %w (the checkpoint was written for another model; pass the same --model)", err)
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
	fmt.Fprintf(r.o.Log, "resumed from %s (step %d, written by %d rank(s) at ZeRO stage %d)\n",
		ck.Tag(), meta.Step, meta.WorldSize, meta.Stage)
	return int(meta.Step) + 1, meta.Tokens, nil
}
