package trainer

import (
	"context"
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/meta"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/model"
)

// PoolBytes is a byte count on the device and in host memory (pinned and
// pageable together).
type PoolBytes struct {
	Device int64 `json:"device"`
	Host   int64 `json:"host"`
}

func (p PoolBytes) plus(q PoolBytes) PoolBytes {
	return PoolBytes{Device: p.Device + q.Device, Host: p.Host + q.Host}
}

// MemoryBreakdown is one rank's memory by category, in bytes, named as the
// backend's categories are: Buffers is the Comm and Workspace categories
// (collective staging, stage-2/3 gradient reduction windows, norm exchange,
// the trainer's scalars).
type MemoryBreakdown struct {
	Params      PoolBytes `json:"params"`
	Grads       PoolBytes `json:"grads"`
	Master      PoolBytes `json:"master"`
	Optimizer   PoolBytes `json:"optimizer"`
	Activations PoolBytes `json:"activations"`
	Buffers     PoolBytes `json:"buffers"`
}

// Total is the sum over every category.
func (b MemoryBreakdown) Total() PoolBytes {
	return b.Params.plus(b.Grads).plus(b.Master).plus(b.Optimizer).plus(b.Activations).plus(b.Buffers)
}

// MemoryEstimate is what one rank of a run holds, computed before launch by
// running the run's own start-up and steps on an accounting backend (see
// Estimate). Every rank holds the same amounts: ZeRO partitions are padded
// to equal lengths.
type MemoryEstimate struct {
	Model        model.Config `json:"model"`
	NumParams    int64        `json:"num_params"` // Ψ, padded vocabulary rows included
	World        int          `json:"world"`      // N: data-parallel ranks
	Nodes        int          `json:"nodes"`
	RanksPerNode int          `json:"ranks_per_node"`
	Stage        int          `json:"stage"`
	MicroBatch   int          `json:"micro_batch"` // B
	SeqLen       int          `json:"seq_len"`     // T
	ParamDType   string       `json:"param_dtype"` // parameters and activations
	GradDType    string       `json:"grad_dtype"`  // gradient accumulation and reduction

	OffloadOptimizer bool `json:"offload_optimizer"` // master weights and AdamW moments in host memory
	OffloadParam     bool `json:"offload_param"`     // stage 3: the parameter partition in host memory
	Checkpointing    bool `json:"activation_checkpointing"`
	CPUCheckpointing bool `json:"cpu_checkpointing"` // the kept block inputs in host memory

	// Steady is what the rank holds once start-up is done (engine built,
	// activations reserved), before the first step.
	Steady MemoryBreakdown `json:"steady"`
	// Peak is what the rank holds, by category, at each pool's largest
	// footprint during a step: Steady plus the gathered stage-3 parameter
	// windows (Params) and the gradient reduction windows (Buffers). Each
	// reduction is taken to finish only when the engine must wait for it,
	// so with overlap_comm it is an upper bound.
	Peak MemoryBreakdown `json:"peak"`
	// The activations of one micro-batch without and with activation
	// checkpointing; the one the run uses is in Steady.Activations.
	ActivationsFull         PoolBytes `json:"activations_full"`
	ActivationsCheckpointed PoolBytes `json:"activations_checkpointed"`
	// HostPerNode is the host memory of all RanksPerNode ranks of one node.
	HostPerNode struct {
		Steady int64 `json:"steady"`
		Peak   int64 `json:"peak"`
	} `json:"host_per_node"`
	// PeakGatheredElements is the most stage-3 parameter elements gathered
	// at once (padded), as the engine's Stats.PeakLiveElements counts them.
	PeakGatheredElements int64 `json:"peak_gathered_elements"`

	// DeepSpeed is what DeepSpeed's own model-states estimator says for the
	// same Ψ, world and offload, for comparison; nil for stage 0, which it
	// has no estimator for.
	DeepSpeed *DeepSpeedEstimate `json:"deepspeed,omitempty"`
}

// EstimateOptions are the run settings that do not come from the config.
type EstimateOptions struct {
	// Nodes is how many machines the World ranks are spread over, evenly
	// (0: 1). It changes only the per-node host totals.
	Nodes int
	// Checkpoint turns activation checkpointing on as train's
	// --gradient-checkpointing does; an activation_checkpointing block in
	// the config turns it on as well.
	Checkpoint bool
	// LoRA, when set, estimates LoRA fine-tuning with these adapters: a
	// frozen base and the adapters' gradients, master and moments only.
	LoRA *model.LoRA
	// LoRAFP32 keeps the adapters in fp32 on a 16-bit base
	// (LoRAOptions.FP32).
	LoRAFP32 bool
}

// Estimate computes one rank's memory for training m with cfg over world
// ranks at sequence length seqLen, without allocating anything: it builds
// rank 0's run on an accounting backend (backend/meta) with a comm.Null
// playing one rank of world, takes two real steps, and reads the backend's
// accounting. The numbers are therefore the trainer's and the ZeRO
// engine's own allocations, by construction (see MemoryEstimate). cfg must
// be resolved for world ("auto" filled); the micro-batch comes from
// cfg.Resolve(world).
func Estimate(cfg *config.Config, m model.Config, world, seqLen int, opts EstimateOptions) (MemoryEstimate, error) {
	var est MemoryEstimate
	if cfg == nil {
		return est, errors.New("estimate: no config")
	}
	if err := m.Validate(); err != nil {
		return est, err
	}
	if world < 1 {
		return est, fmt.Errorf("estimate: %d ranks; want at least 1", world)
	}
	nodes := opts.Nodes
	if nodes == 0 {
		nodes = 1
	}
	if nodes < 1 || world%nodes != 0 {
		return est, fmt.Errorf("estimate: %d ranks do not spread evenly over %d nodes; pick a node count that divides the rank count", world, nodes)
	}
	batch, err := cfg.Resolve(world)
	if err != nil {
		return est, err
	}
	pdt, gdt, err := precision(cfg)
	if err != nil {
		return est, err
	}
	ckpt := opts.Checkpoint || cfg.ActivationCheckpointing.Present
	hostCkpt := ckpt && cfg.ActivationCheckpointing.CPUCheckpointing
	o := Options{Config: cfg, Batch: batch, Model: m, SeqLen: seqLen, MaxSteps: estimateSteps, Checkpoint: ckpt, CheckpointHost: hostCkpt}
	if opts.LoRA != nil {
		o.LoRA = &LoRAOptions{Config: *opts.LoRA, FP32: opts.LoRAFP32}
	}
	used, err := measureOnMeta(o)
	if err != nil {
		return est, err
	}
	// The activations of the other choice, for the table's second row.
	o.Checkpoint, o.CheckpointHost = !ckpt, !ckpt && cfg.ActivationCheckpointing.CPUCheckpointing
	other, err := measureOnMeta(o)
	if err != nil {
		return est, err
	}
	zo := engineOptions(cfg)
	lay := model.NewLayout(m)
	est = MemoryEstimate{
		Model:     m,
		NumParams: int64(lay.NumParams()), World: world, Nodes: nodes, RanksPerNode: world / nodes,
		Stage: zo.Stage, MicroBatch: batch.MicroBatch, SeqLen: seqLen,
		ParamDType: pdt.String(), GradDType: gdt.String(),
		OffloadOptimizer: zo.OffloadOptimizer, OffloadParam: zo.OffloadParam, Checkpointing: ckpt, CPUCheckpointing: hostCkpt,
		Steady: used.steady, Peak: used.peak, PeakGatheredElements: used.gathered,
	}
	full, checkpointed := used, other
	if ckpt {
		full, checkpointed = other, used
	}
	est.ActivationsFull, est.ActivationsCheckpointed = full.steady.Activations, checkpointed.steady.Activations
	est.HostPerNode.Steady = int64(est.RanksPerNode) * est.Steady.Total().Host
	est.HostPerNode.Peak = int64(est.RanksPerNode) * est.Peak.Total().Host
	est.DeepSpeed = deepSpeedEstimate(lay, zo.Stage, world, nodes, zo.OffloadOptimizer, zo.OffloadParam)
	return est, nil
}

// estimateSteps is how many steps an estimate takes: the second shows the
// steady state of every buffer a step grows into (reduction windows, the
// optimizer's first touch).
const estimateSteps = 2

// metaMeasure is what one run on the accounting backend held.
type metaMeasure struct {
	steady   MemoryBreakdown // after start-up
	peak     MemoryBreakdown // at each pool's peak over the steps
	gathered int64           // the most partitioned-parameter elements gathered at once
}

// measureOnMeta builds rank 0 of o's run on an accounting backend, with
// collectives that run lazily (so a reduction finishes only when it must:
// the most a real run can hold) and takes estimateSteps steps on zero
// tokens.
func measureOnMeta(o Options) (metaMeasure, error) {
	var mm metaMeasure
	be := meta.New(meta.Options{})
	o.Comm = comm.NewNull(0, o.Batch.WorldSize)
	c, o, err := normalize(be, o)
	if err != nil {
		return mm, err
	}
	r := &run{be: be, o: o, c: c, rank: 0, world: c.Size(), cctx: context.Background(), lazy: true, batches: zeroBatches{}}
	defer r.close()
	if err := r.build(); err != nil {
		return mm, err
	}
	cur := be.Memory().Current
	mm.steady = breakdownOf(func(p backend.Pool, c backend.Category) int64 { return cur[p][c] })
	be.ResetPeak()
	for n := 1; n <= o.MaxSteps; n++ {
		if _, _, err := r.step(context.Background(), n); err != nil {
			return mm, fmt.Errorf("estimate: step %d: %w", n, err)
		}
	}
	mm.peak = breakdownOf(func(p backend.Pool, c backend.Category) int64 { return be.AtPeak(p)[c] })
	for _, e := range r.tr.engines() {
		mm.gathered += int64(e.Stats().PeakLiveElements)
	}
	return mm, nil
}

// breakdownOf sums bytes by pool and category into the estimate's
// categories, the two host pools together.
func breakdownOf(bytes func(backend.Pool, backend.Category) int64) MemoryBreakdown {
	pb := func(cs ...backend.Category) PoolBytes {
		var p PoolBytes
		for _, c := range cs {
			p.Device += bytes(backend.Device, c)
			p.Host += bytes(backend.HostPinned, c) + bytes(backend.Host, c)
		}
		return p
	}
	return MemoryBreakdown{
		Params: pb(backend.Params), Grads: pb(backend.Grads), Master: pb(backend.Master),
		Optimizer: pb(backend.Optimizer), Activations: pb(backend.Activations),
		Buffers: pb(backend.Comm, backend.Workspace),
	}
}
