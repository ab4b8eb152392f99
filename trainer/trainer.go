// Package trainer owns the training loop: micro-steps and gradient
// accumulation from the DeepSpeed config, the ZeRO engine's gradient
// reduction and optimizer step with clipping and the scheduler, evaluation,
// the metrics log and the progress line (rank 0), and the final weights. It
// knows interfaces only: cmd/gotrain passes in the Backend and the Comm.
// What a run trains, the whole model or LoRA adapters on a frozen base, is
// a trainee (trainee.go); the step is one path for every kind of data.
package trainer

import (
	"context"
	"fmt"
	"io"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
)

// Options are one training run's settings, already resolved from the config
// file and the flags.
type Options struct {
	Config *config.Config // the DeepSpeed config, "auto" resolved
	Batch  config.Batch   // the resolved batch triangle; Batch.WorldSize must equal the Comm's size
	Model  model.Config
	// Comm connects the data-parallel ranks; nil runs one process
	// (comm.Solo). Every rank calls Run with the same options.
	Comm comm.Comm

	InitFrom string // a HF snapshot directory, HF safetensors or llm.c .bin weights; empty: random init
	// Snapshot is the Hugging Face snapshot directory the model comes from
	// (--init-from or --model DIR; "" none). Its tokenizer.json,
	// tokenizer_config.json and generation_config.json are copied into
	// OutputDir at start-up, so the final weights, and any checkpoint
	// exported from the run, travel with the tokenizer they were trained on.
	Snapshot string
	Seed     uint64

	Data []string // train shards (paths or globs); not read when Batches is set
	// Batches, when set, supplies the training micro-batches instead of
	// the shards in Data (random tokens for a benchmark); such a run keeps
	// no data position in its checkpoints.
	Batches     BatchSource
	ValData     []string // val shards; empty: no eval
	SeqLen      int      // T
	MaxSteps    int      // optimizer steps
	EvalEvery   int      // steps between evals; 0: only before the first step and after the last
	EvalBatches int      // batches per eval: 0 scores every validation row or token window once; N > 0 caps it at N, evenly spaced
	Shuffle     bool     // permute shard and batch order every epoch (seeded by Seed); default llm.c's order
	// EvalBatchSize is the validation samples per rank in one forward
	// (Hugging Face's per_device_eval_batch_size); 0: the micro-batch
	// size, whose activation memory the run already holds.
	EvalBatchSize int
	// Pack reads shards with loss-mask companions as one token stream
	// (full T-token samples across rows) instead of one sample per row.
	Pack bool
	// Checkpoint recomputes each block in backward from its kept input
	// (activation_checkpointing in the config, or --gradient-checkpointing);
	// CheckpointHost keeps those inputs in host memory (cpu_checkpointing).
	Checkpoint, CheckpointHost bool

	OutputDir string    // metrics.jsonl and model.safetensors go here (rank 0 writes)
	PeakFLOPS float64   // per-rank peak FLOP/s for MFU; 0: MFU not reported
	Log       io.Writer // progress lines (rank 0 only); nil: discard
	// Observer, when set, receives every optimizer step on this rank (the
	// Prometheus endpoint).
	Observer Observer
	// Ready, when set, is called once start-up is done, before step 1, with
	// this rank's memory as the backend accounts it (train prints it beside
	// the estimate on rank 0). An error stops the run.
	Ready      func(local backend.MemoryStats) error
	PrintEvery int // steps between progress lines; 0: steps_per_print or 10

	// Checkpoints under <OutputDir>/checkpoints: every SaveEvery steps (0:
	// only at the end and when stopped by a signal), keeping the newest
	// SaveTotalLimit tags of this run's lineage (0: all). Resume is "" or
	// "never" (start afresh; an output directory that holds checkpoints is
	// refused unless Overwrite moves them aside), "auto" (continue from
	// latest, or the newest tag that verifies; start afresh if there is
	// none), or a checkpoints directory or tag directory. A resume whose
	// settings differ from the checkpoint's in a way that changes the math
	// is refused unless AllowConfigChange.
	SaveEvery, SaveTotalLimit int
	Resume                    string
	Overwrite                 bool
	AllowConfigChange         bool
	ConfigText                string // the config file as read, stored in checkpoints

	// Stage, when set, is the stage of a curriculum this run trains
	// (RunStages): its steps are Stage.FirstStep..MaxSteps, its checkpoints
	// record it, and Stage.LRScale multiplies the scheduled learning rate.
	Stage *StageInfo

	// Version is gotrain's version, one of the RunFields every rank and a
	// resumed checkpoint compare.
	Version string

	// LoRA, when set, trains LoRA adapters on the frozen model (lora.go)
	// and writes them as a PEFT adapter directory into OutputDir.
	LoRA *LoRAOptions
}

// Observer receives each optimizer step with this rank's memory accounting
// and cumulative communication counters.
type Observer interface {
	ObserveStep(rec metrics.StepRecord, local backend.MemoryStats, comm metrics.CommCounters)
}

// Result summarises a finished run.
type Result struct {
	Steps           int
	FirstLoss       float64
	FinalLoss       float64
	SkippedSteps    int     // fp16 overflow steps (no update)
	FirstValLoss    float64 // NaN without val data
	FinalValLoss    float64
	TokensPerSecond float64 // all ranks together, over the run excluding the first step
	MFU             float64 // per rank
	WeightsPath     string
	// StartStep is the first step this process ran: 1, or the step after
	// the checkpoint in ResumedFrom. StartStep > MaxSteps means the
	// checkpoint was already at the end and nothing was trained.
	StartStep   int
	ResumedFrom string
	// Memory is this rank's backend accounting at the end of the run.
	Memory backend.MemoryStats
}

// StoppedError is Run's error when a signal (the context's cancellation)
// stopped every rank at a step boundary. The steps done by then are saved
// unless there was no output directory.
type StoppedError struct {
	Step       int    // the last step completed; 0 when none was
	Checkpoint string // the tag holding Step ("" when nothing is saved)
	Cause      error  // context.Cause of the run's context, e.g. the signal
}

func (e *StoppedError) Error() string {
	switch {
	case e.Checkpoint != "":
		return fmt.Sprintf("stopped (%v) after saving checkpoint %s", e.Cause, e.Checkpoint)
	case e.Step > 0:
		return fmt.Sprintf("stopped (%v) after step %d; nothing saved (no --output-dir)", e.Cause, e.Step)
	}
	return fmt.Sprintf("stopped (%v) before the first step", e.Cause)
}

// Unwrap is the cause, so errors.Is(err, context.Canceled) holds.
func (e *StoppedError) Unwrap() error { return e.Cause }

// Run trains a model from scratch (or from InitFrom, or from a
// checkpoint) for MaxSteps optimizer steps on be.
func Run(ctx context.Context, be backend.Backend, opts Options) (*Result, error) {
	r, err := newRun(ctx, be, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if opts.Ready != nil {
		if err := opts.Ready(be.Memory()); err != nil {
			return nil, err
		}
	}
	return r.loop(ctx)
}
