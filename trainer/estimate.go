package trainer

import (
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/zero"
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

// MemoryEstimate is what one rank of a run holds, computed before launch
// from the partition arithmetic the ZeRO engine uses (zero.NewPlan) and the
// model's activation plan (model.ActivationBytes). Every rank holds the same
// amounts: ZeRO partitions are padded to equal lengths.
type MemoryEstimate struct {
	Model        model.Config `json:"-"`
	Shape        ModelShape   `json:"model"`
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
	// Peak is the rank's largest footprint during a step: Steady plus the
	// stage-3 gathered parameter windows (Params) and the stage-2/3
	// gradient reduction windows (Buffers) at the moment their sum is
	// largest. With overlap_comm it assumes each reduction finishes only
	// when the engine must wait for it, so it is an upper bound.
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

// ModelShape is the model's shape under Hugging Face's config.json names.
type ModelShape struct {
	NPositions  int `json:"n_positions"`
	VocabSize   int `json:"vocab_size"`
	PaddedVocab int `json:"padded_vocab_size"`
	NLayer      int `json:"n_layer"`
	NHead       int `json:"n_head"`
	NEmbd       int `json:"n_embd"`
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
}

// Estimate computes one rank's memory for training m with cfg over world
// ranks at sequence length seqLen, without allocating anything. cfg must be
// resolved for world ("auto" filled); the micro-batch comes from
// cfg.Resolve(world). The numbers follow the allocations the trainer and
// the ZeRO engine make (see MemoryEstimate).
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
	if seqLen < 1 || seqLen > m.MaxT {
		return est, fmt.Errorf("estimate: sequence length %d: must be between 1 and the model's n_positions %d", seqLen, m.MaxT)
	}
	batch, err := cfg.Resolve(world)
	if err != nil {
		return est, err
	}
	pdt, gdt, err := precision(cfg)
	if err != nil {
		return est, err
	}
	zo := engineOptions(cfg)
	zo.ParamDType, zo.GradAccumDType = pdt, gdt
	offOpt, offParam, err := offloadPlacement(cfg)
	if err != nil {
		return est, err
	}

	lay := model.NewLayout(m)
	sizes := make([]int, lay.NumGroups())
	for g := range sizes {
		_, sizes[g] = lay.GroupRange(g)
	}
	plan := zero.NewPlan(sizes, world)
	ckpt := opts.Checkpoint || cfg.ActivationCheckpointing.Present
	hostCkpt := ckpt && cfg.ActivationCheckpointing.CPUCheckpointing

	est = MemoryEstimate{
		Model: m, Shape: ModelShape{NPositions: m.MaxT, VocabSize: m.V, PaddedVocab: m.Vp, NLayer: m.L, NHead: m.NH, NEmbd: m.C},
		NumParams: int64(lay.NumParams()), World: world, Nodes: nodes, RanksPerNode: world / nodes,
		Stage: zo.Stage, MicroBatch: batch.MicroBatch, SeqLen: seqLen,
		ParamDType: pdt.String(), GradDType: gdt.String(),
		OffloadOptimizer: offOpt, OffloadParam: offParam, Checkpointing: ckpt, CPUCheckpointing: hostCkpt,
		ActivationsFull:         activationPools(m, batch.MicroBatch, seqLen, pdt, false, false),
		ActivationsCheckpointed: activationPools(m, batch.MicroBatch, seqLen, pdt, true, hostCkpt),
	}
	est.Steady = engineResident(plan, lay.NumParams(), zo, offOpt, offParam)
	est.Steady.Activations = est.ActivationsFull
	if ckpt {
		est.Steady.Activations = est.ActivationsCheckpointed
	}
	est.Steady.Buffers = est.Steady.Buffers.plus(trainerBuffers(world))

	tr := simulateStep(plan, zo, batch.GradAccum)
	est.PeakGatheredElements = tr.gathered
	est.Peak = est.Steady
	est.Peak.Params.Device += tr.gathered * int64(pdt.Size())
	est.Peak.Buffers.Device += tr.windows * int64(gdt.Size())

	est.HostPerNode.Steady = int64(est.RanksPerNode) * est.Steady.Total().Host
	est.HostPerNode.Peak = int64(est.RanksPerNode) * est.Peak.Total().Host
	est.DeepSpeed = deepSpeedEstimate(lay, zo.Stage, world, nodes, offOpt, offParam)
	return est, nil
}

// offloadPlacement reads which ZeRO states live in host memory. As in
// DeepSpeed, optimizer offload needs stage ≥ 1 (stage 0 ignores it, as the
// config warns) and parameter offload stage 3; gotrain offloads to CPU
// memory only.
func offloadPlacement(cfg *config.Config) (optimizer, param bool, err error) {
	z := cfg.ZeRO
	if o := z.OffloadOptimizer; o != nil && o.Device != "none" && o.Device != "" {
		if o.Device != "cpu" {
			return false, false, fmt.Errorf("zero_optimization.offload_optimizer.device %q: gotrain offloads to cpu memory only", o.Device)
		}
		if o.Ratio != 0 && o.Ratio != 1 {
			return false, false, fmt.Errorf("zero_optimization.offload_optimizer.ratio %v: gotrain offloads the whole optimizer state (ratio 1)", o.Ratio)
		}
		optimizer = z.Stage >= 1
	}
	if o := z.OffloadParam; o != nil && o.Device != "none" && o.Device != "" {
		if o.Device != "cpu" {
			return false, false, fmt.Errorf("zero_optimization.offload_param.device %q: gotrain offloads to cpu memory only", o.Device)
		}
		if z.Stage != 3 {
			return false, false, fmt.Errorf("zero_optimization.offload_param needs stage 3, but stage is %d", z.Stage)
		}
		param = true
	}
	return optimizer, param, nil
}

// engineResident is what zero.New allocates for the stage (zero/engine.go
// allocate): the buffers it keeps until Close. Sizes are in elements of
// the plan. Offload moves states from the device to the host column, as
// DeepSpeed's ZeRO-Offload does: optimizer offload the fp32 master and the
// moments (plus a host chunk each for the gradient copied out and the
// updated parameters), parameter offload the stage-3 partition (plus a
// device chunk each gather copies it into). Persistent stage-3 groups stay
// whole on the device either way.
func engineResident(plan zero.Plan, total int, o zero.Options, offOpt, offParam bool) MemoryBreakdown {
	ps, gs := int64(o.ParamDType.Size()), int64(o.GradAccumDType.Size())
	const f32 = 4
	part, padded, n := int64(plan.PartLen), int64(plan.PaddedLen), int64(total)
	var maxChunk int64
	for _, gp := range plan.Groups {
		maxChunk = max(maxChunk, int64(gp.Chunk))
	}
	var b MemoryBreakdown
	var master, moments PoolBytes
	state := part // elements of master and of each moment
	switch o.Stage {
	case 0:
		state = n
		b.Params.Device = n * ps
		b.Grads.Device = n * gs
		if o.ParamDType != backend.F32 {
			master.Device = n * f32
		}
	case 1, 2:
		b.Params.Device = padded * ps
		b.Grads.Device = part * gs // the reduced partition
		if o.Stage == 1 {
			b.Grads.Device += padded * gs // full gradients, reduced at the step
		}
		b.Buffers.Device = 2 * maxChunk * ps // double-buffered all-gather staging
	case 3:
		if offParam {
			b.Params.Host = part * ps
			b.Buffers.Device += maxChunk * ps // a chunk copied in for its all-gather
		} else {
			b.Params.Device = part * ps
		}
		// Groups under the persistence threshold stay whole on the device.
		for _, gp := range plan.Groups {
			if int64(gp.Len) <= o.PersistenceThreshold {
				b.Params.Device += int64(gp.Padded) * ps
			}
		}
		b.Grads.Device = part * gs
	}
	if o.Stage >= 1 {
		master.Device = part * f32
	}
	moments.Device = 2 * state * f32
	// Chunk buffers next to the optimizer state count as buffers there.
	optBuffers := &b.Buffers.Device
	if offOpt {
		optBuffers = &b.Buffers.Host
		master.Host, master.Device = master.Device, 0
		moments.Host, moments.Device = moments.Device, 0
	}
	b.Master, b.Optimizer = master, moments
	if o.Stage >= 1 {
		if offOpt {
			*optBuffers += maxChunk * f32 // the reduced gradient chunk copied out
		}
		// AdamW writes where the optimizer state is; parameters on the
		// other side of the host/device boundary get the update through
		// a chunk there.
		if paramsOnDevice := o.Stage < 3 || !offParam; paramsOnDevice == offOpt {
			*optBuffers += maxChunk * ps
		}
	}
	if o.Stage >= 2 {
		b.Buffers.Device += maxChunk * gs // reduce-scatter output
	}
	// The global-norm exchange: one rank's float64 and every rank's.
	b.Buffers.Device += 8 + 8*int64(plan.World)
	return b
}

// trainerBuffers are the trainer's own allocations (trainer.go setup): a
// device scalar for averaging the loss, and two host buffers carrying
// every rank's memory accounting (two int32 words per count).
func trainerBuffers(world int) PoolBytes {
	words := int64(len(backend.Pools()) * (len(backend.Categories()) + 1) * 2)
	return PoolBytes{Device: 4, Host: 4 * words * int64(1+world)}
}

// activationPools splits model.ActivationBytes between the pools. With
// checkpointing in host memory (cpu_checkpointing) the L+1 kept block
// inputs, (B·T, C) each, live in a host arena and one more (B·T, C) buffer
// on the device takes each one back for recompute. The arenas align every
// tensor to 256 bytes, which this split repeats.
func activationPools(m model.Config, B, T int, dt backend.DType, ckpt, hostCkpt bool) PoolBytes {
	all := model.ActivationBytes(m, B, T, dt, ckpt)
	if !ckpt || !hostCkpt {
		return PoolBytes{Device: all}
	}
	const arenaAlign = 256
	es := int64(dt.Size())
	nc := int64(B * T * m.C)
	align := int64(arenaAlign) / es
	slot := (nc + align - 1) / align * align
	host := (int64(m.L)*slot + nc) * es
	dev := all - int64(m.L+1)*slot*es + slot*es
	return PoolBytes{Device: dev, Host: host}
}
