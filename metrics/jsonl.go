package metrics

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/internal/atomicfile"
)

// StepRecord is one optimizer step as written to metrics.jsonl. Loss is the
// global-batch mean the step optimized; LR the rate the step used.
type StepRecord struct {
	Step            int        `json:"step"`
	Loss            float64    `json:"loss"`
	LR              float64    `json:"lr"`
	GradNorm        float64    `json:"grad_norm"`
	TokensPerSecond float64    `json:"tokens_per_second"`
	LossScale       float64    `json:"loss_scale"`
	MFU             float64    `json:"mfu"`
	Tokens          int64      `json:"tokens"`
	StepSeconds     float64    `json:"step_seconds"`
	Memory          RankMemory `json:"memory"`
	Skipped         bool       `json:"skipped,omitempty"` // fp16 overflow: no update this step
	SkippedSteps    int        `json:"skipped_steps"`
	// Wall-clock breakdown of the step: forward and backward over every
	// micro-batch, the optimizer step (gradient reduction for stages 0-1,
	// clipping, AdamW, parameter gathering), and the time this rank spent
	// in collectives (which overlaps backward with overlap_comm).
	ForwardSeconds   float64 `json:"forward_seconds"`
	BackwardSeconds  float64 `json:"backward_seconds"`
	OptimizerSeconds float64 `json:"optimizer_seconds"`
	CommSeconds      float64 `json:"comm_seconds"`
}

// EvalRecord is one evaluation, written on its own line.
type EvalRecord struct {
	Step    int     `json:"step"`
	ValLoss float64 `json:"val_loss"`
	Batches int     `json:"val_batches"`
}

// MemoryBytes is a rank's memory by pool and category, in bytes, with the
// peak of each pool: {"device": {"params": 123, ...}, "peak": {"device": 456}}.
type MemoryBytes map[string]map[string]int64

// RankMemory is every rank's memory, indexed by rank.
type RankMemory []MemoryBytes

// MemoryOf converts backend accounting into the JSON shape, leaving out zero
// entries so lines stay short.
func MemoryOf(s backend.MemoryStats) MemoryBytes {
	out := MemoryBytes{}
	peak := map[string]int64{}
	for _, p := range backend.Pools() {
		cats := map[string]int64{}
		for _, c := range backend.Categories() {
			if v := s.Current[p][c]; v != 0 {
				cats[c.String()] = v
			}
		}
		if len(cats) > 0 {
			out[p.String()] = cats
		}
		if s.Peak[p] != 0 {
			peak[p.String()] = s.Peak[p]
		}
	}
	out["peak"] = peak
	return out
}

// JSONL appends records to a metrics.jsonl file. A resumed run appends to the
// same file after TrimLog has dropped the steps it will run again.
type JSONL struct {
	f *os.File
	w *bufio.Writer
}

// OpenJSONL opens path for appending, creating it if needed.
func OpenJSONL(path string) (*JSONL, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, atomicfile.FileMode)
	if err != nil {
		return nil, fmt.Errorf("open metrics log: %w", err)
	}
	return &JSONL{f: f, w: bufio.NewWriter(f)}, nil
}

// OpenRunLog opens a run's metrics log at path for appending: a run that
// resumes after step resumeStep (> 0) first drops the records beyond it
// (it computes those steps again); a fresh run (resumeStep 0) first moves
// an earlier run's non-empty log aside. note says what was done, if
// anything, for the user.
func OpenRunLog(path string, resumeStep int) (j *JSONL, note string, err error) {
	if resumeStep > 0 {
		n, err := TrimLog(path, resumeStep)
		if err != nil {
			return nil, "", err
		}
		if n > 0 {
			note = fmt.Sprintf("dropped %d record(s) beyond step %d from %s: this run computes those steps again", n, resumeStep, path)
		}
	} else {
		moved, ok, err := SetAside(path, time.Now())
		if err != nil {
			return nil, "", err
		}
		if ok {
			note = fmt.Sprintf("moved an earlier run's %s to %s", filepath.Base(path), moved)
		}
	}
	j, err = OpenJSONL(path)
	return j, note, err
}

// Write appends one record as a line and flushes it, so a killed run keeps
// every completed step. Non-finite floats become null (JSON has no NaN).
func (j *JSONL) Write(rec any) error {
	b, err := json.Marshal(rec)
	if err != nil {
		b, err = json.Marshal(finiteCopy(rec))
		if err != nil {
			return fmt.Errorf("metrics log: %w", err)
		}
	}
	if _, err := j.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("metrics log %s: %w", j.f.Name(), err)
	}
	return j.w.Flush()
}

// Sync makes every record written so far durable (at a checkpoint, so the
// log never ends before the state a resume starts from).
func (j *JSONL) Sync() error {
	if err := j.w.Flush(); err != nil {
		return fmt.Errorf("metrics log %s: %w", j.f.Name(), err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("metrics log %s: %w", j.f.Name(), err)
	}
	return nil
}

// Close flushes and closes the file.
func (j *JSONL) Close() error {
	if err := j.w.Flush(); err != nil {
		j.f.Close()
		return err
	}
	return j.f.Close()
}

// finiteCopy re-encodes a step record with NaN/Inf fields as nulls.
func finiteCopy(rec any) map[string]any {
	out := map[string]any{}
	switch r := rec.(type) {
	case StepRecord:
		out["step"] = r.Step
		out["loss"] = finite(r.Loss)
		out["lr"] = finite(r.LR)
		out["grad_norm"] = finite(r.GradNorm)
		out["tokens_per_second"] = finite(r.TokensPerSecond)
		out["loss_scale"] = finite(r.LossScale)
		out["mfu"] = finite(r.MFU)
		out["tokens"] = r.Tokens
		out["step_seconds"] = finite(r.StepSeconds)
		out["memory"] = r.Memory
		out["skipped"] = r.Skipped
		out["skipped_steps"] = r.SkippedSteps
		out["forward_seconds"] = finite(r.ForwardSeconds)
		out["backward_seconds"] = finite(r.BackwardSeconds)
		out["optimizer_seconds"] = finite(r.OptimizerSeconds)
		out["comm_seconds"] = finite(r.CommSeconds)
	case EvalRecord:
		out["step"] = r.Step
		out["val_loss"] = finite(r.ValLoss)
		out["val_batches"] = r.Batches
	}
	return out
}

func finite(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return x
}
