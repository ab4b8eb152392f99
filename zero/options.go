package zero

import (
	"fmt"
	"time"

	"github.com/gotrain/gotrain/backend"
)

// Options are the zero_optimization settings the engine runs with. Sizes are
// in elements, as in DeepSpeed's config. Zero values are taken literally
// (a PrefetchBucketSize of 0 turns prefetching off); DefaultOptions has
// DeepSpeed's defaults.
type Options struct {
	// Stage is 0 (plain data parallelism), 1 (optimizer states
	// partitioned), 2 (+ gradients) or 3 (+ parameters).
	Stage int
	// ParamDType is the parameters' storage type (zero: F32). Stages ≥ 1
	// always keep an fp32 master partition; stage 0 keeps a full fp32
	// master only for 16-bit parameters.
	ParamDType backend.DType
	// GradAccumDType is the type gradients accumulate and reduce in
	// (data_types.grad_accum_dtype; zero: F32).
	GradAccumDType backend.DType

	// ReduceBucketSize bounds each all-reduce of stage 0 (reduce_bucket_size,
	// ≥ 1). Stages ≥ 1 reduce-scatter one whole group per collective.
	ReduceBucketSize int64
	// AllgatherBucketSize (allgather_bucket_size) is accepted for
	// compatibility and has no effect: every all-gather gathers one group's
	// equal chunks directly into place, which is DeepSpeed's
	// all_gather_into_tensor path where the setting is unused as well.
	AllgatherBucketSize int64
	// PrefetchBucketSize (stage3_prefetch_bucket_size) bounds the elements
	// gathered ahead of use and not yet acquired.
	PrefetchBucketSize int64
	// MaxLiveParameters (stage3_max_live_parameters) bounds the gathered
	// elements a prefetch may bring the live total to. Groups the model
	// acquires are gathered whatever the total.
	MaxLiveParameters int64
	// MaxReuseDistance (stage3_max_reuse_distance): a stage-3 group whose
	// next use, by the pass order, comes within fewer than this many
	// gathered elements stays gathered when released (0: every release
	// frees). Such windows count as live and are the first to go when a
	// gather needs room under MaxLiveParameters.
	MaxReuseDistance int64
	// PersistenceThreshold (stage3_param_persistence_threshold): stage-3
	// groups of at most this many elements stay whole on every rank.
	PersistenceThreshold int64
	// OverlapComm (overlap_comm): stages 2 and 3 reduce a group's gradients
	// on the engine's comm goroutine while backward continues, with at most
	// two reductions in flight. Without it GradsReady waits for its
	// reduction. Stages 0 and 1 reduce at Step either way.
	OverlapComm bool

	// OffloadOptimizer (offload_optimizer.device "cpu"; stages 1–3) keeps
	// the fp32 master partition and the AdamW moments in host memory and
	// runs AdamW there: at Step each group's reduced gradient chunk is
	// copied out to the host, updated, and the new parameters (rounded to
	// ParamDType) copied back to the device. See the package documentation.
	OffloadOptimizer bool
	// OffloadOptimizerPinned (offload_optimizer.pin_memory) puts the
	// offloaded optimizer state in the HostPinned pool instead of Host. It
	// has no effect without OffloadOptimizer.
	OffloadOptimizerPinned bool
	// OffloadParam (offload_param.device "cpu"; stage 3 only) keeps the
	// parameter partition in host memory; each chunk is copied to the
	// device just before its all-gather. Persistent groups stay whole on
	// the device.
	OffloadParam bool
	// OffloadParamPinned (offload_param.pin_memory) puts the offloaded
	// partition in the HostPinned pool instead of Host. It has no effect
	// without OffloadParam.
	OffloadParamPinned bool

	// Timeout, when positive, bounds each collective the engine issues;
	// otherwise a collective is bounded by its context's deadline or the
	// Comm's default timeout.
	Timeout time.Duration

	// Inference makes an engine that only serves parameters (sampling,
	// evaluation): no gradients, master weights, moments or reduction
	// buffers are allocated, and acquiring a group for a backward pass or
	// stepping is an error.
	Inference bool
	// Frozen makes an engine for parameters that are used but never
	// trained (LoRA's base model): it holds what Inference holds (the
	// parameters, partitioned and gathered per group at stage 3) and nothing
	// else, but it also serves backward passes: Acquire(g, true) returns the
	// parameters, gathered in the backward order, with the zero Buffer for
	// the gradients. Frozen implies Inference.
	Frozen bool
	// LazyComm runs each collective only when the engine waits for it, on
	// the caller's goroutine, instead of on the comm goroutine as soon as it
	// is queued. The calls and allocations are the same; a reduction then
	// finishes only when it must, so the memory held is the most a real run
	// can reach. Estimates use it on an accounting backend, where it also
	// makes the measurement independent of timing.
	LazyComm bool
}

// What each stage partitions. Everything else in the package asks these
// rather than the stage number.

// statePartitioned: master weights and moments are split over the ranks
// (stages 1–3); otherwise every rank holds them whole and runs the same
// update.
func (o Options) statePartitioned() bool { return o.Stage >= 1 }

// gradsPartitioned: gradients exist only as this rank's partition, reduced
// group by group as backward produces them (stages 2–3); otherwise they
// accumulate whole and are reduced at Step.
func (o Options) gradsPartitioned() bool { return o.Stage >= 2 }

// paramsPartitioned: parameters exist only as this rank's partition and are
// gathered around each use (stage 3).
func (o Options) paramsPartitioned() bool { return o.Stage == 3 }

// DefaultOptions are DeepSpeed's zero_optimization defaults for stage:
// reduce and all-gather buckets 5e8, prefetch bucket 5e7, live parameters
// and reuse distance 1e9, persistence threshold 1e5, overlap_comm on for
// stage 3 only.
func DefaultOptions(stage int) Options {
	return Options{
		Stage:                stage,
		ParamDType:           backend.F32,
		GradAccumDType:       backend.F32,
		ReduceBucketSize:     5e8,
		AllgatherBucketSize:  5e8,
		PrefetchBucketSize:   5e7,
		MaxLiveParameters:    1e9,
		MaxReuseDistance:     1e9,
		PersistenceThreshold: 1e5,
		OverlapComm:          stage == 3,
	}
}

// normalize fills the dtype defaults and checks every setting.
func (o Options) normalize() (Options, error) {
	if o.ParamDType == 0 {
		o.ParamDType = backend.F32
	}
	if o.GradAccumDType == 0 {
		o.GradAccumDType = backend.F32
	}
	if o.Frozen {
		o.Inference = true
	}
	switch {
	case o.Stage < 0 || o.Stage > 3:
		return o, fmt.Errorf("zero: stage %d does not exist (use 0, 1, 2 or 3)", o.Stage)
	case !o.ParamDType.IsFloat():
		return o, fmt.Errorf("zero: parameter dtype %s is not a float type", o.ParamDType)
	case !o.GradAccumDType.IsFloat():
		return o, fmt.Errorf("zero: gradient accumulation dtype %s is not a float type", o.GradAccumDType)
	case o.ReduceBucketSize < 1:
		return o, fmt.Errorf("zero: reduce_bucket_size %d must be at least 1", o.ReduceBucketSize)
	case o.AllgatherBucketSize < 0:
		return o, fmt.Errorf("zero: allgather_bucket_size %d must not be negative", o.AllgatherBucketSize)
	case o.PrefetchBucketSize < 0:
		return o, fmt.Errorf("zero: stage3_prefetch_bucket_size %d must not be negative", o.PrefetchBucketSize)
	case o.MaxLiveParameters < 0:
		return o, fmt.Errorf("zero: stage3_max_live_parameters %d must not be negative", o.MaxLiveParameters)
	case o.MaxReuseDistance < 0:
		return o, fmt.Errorf("zero: stage3_max_reuse_distance %d must not be negative", o.MaxReuseDistance)
	case o.PersistenceThreshold < 0:
		return o, fmt.Errorf("zero: stage3_param_persistence_threshold %d must not be negative", o.PersistenceThreshold)
	case o.OffloadOptimizer && o.Stage < 1:
		return o, fmt.Errorf("zero: offload_optimizer needs ZeRO stage 1, 2 or 3 and the stage is %d: set zero_optimization.stage to at least 1, or offload_optimizer.device to \"none\"", o.Stage)
	case o.OffloadParam && o.Stage != 3:
		return o, fmt.Errorf("zero: offload_param needs ZeRO stage 3 and the stage is %d: set zero_optimization.stage to 3, or offload_param.device to \"none\"", o.Stage)
	case o.Timeout < 0:
		return o, fmt.Errorf("zero: collective timeout %s must not be negative", o.Timeout)
	}
	return o, nil
}
