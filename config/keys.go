package config

import (
	"math"
	"strings"
)

// kind is the JSON shape a key accepts.
type kind uint8

const (
	kindBlock      kind = iota // object whose keys are listed in the table
	kindRawBlock               // object kept as raw JSON; its keys are not checked
	kindBool                   // true/false
	kindInt                    // integer; integral floats such as 5e8 are accepted
	kindFloat                  // any number
	kindString                 // string
	kindFloatList              // array of numbers (betas)
	kindStringList             // array of strings
	kindAny                    // any JSON value, kept raw
	kindParams                 // optimizer/scheduler params: the keys depend on the sibling "type"
)

// Status says what gotrain does with a key.
type Status uint8

const (
	// Supported keys change what gotrain does, as DeepSpeed would.
	Supported Status = iota
	// Ignored keys are accepted and validated but have no effect in gotrain (for example CUDA-allocator or
	// logging details that gotrain handles its own way); they never change the numbers a run produces.
	Ignored
	// NotSupported keys are accepted but gotrain lacks the feature; setting one to a non-default value
	// produces a single warning listing all of them.
	NotSupported
)

func (s Status) String() string {
	switch s {
	case Supported:
		return "supported"
	case Ignored:
		return "accepted, ignored"
	default:
		return "not supported"
	}
}

// hfKey names the Hugging Face TrainingArguments value that fills an "auto" key (deepspeed-semantics §1.1).
type hfKey uint8

const (
	hfNone hfKey = iota
	hfMicro
	hfGAS
	hfTBS
	hfClip
	hfLR
	hfBetas
	hfEps
	hfWeightDecay
	hfWarmupMinLR
	hfWarmupMaxLR
	hfWarmupSteps
	hfTotalSteps
	hfFP16
	hfBF16
	hfReduceBucket
	hfPrefetchBucket
	hfPersistence
)

// keySpec describes one key: its path, shape, DeepSpeed code default, and gotrain status.
type keySpec struct {
	path     string   // dotted path from the top of the file
	kind     kind     // accepted JSON shape
	def      any      // code default: bool, int64, float64, string, []float64, []string; nil means None
	status   Status   // what gotrain does with it
	hf       hfKey    // how "auto" is filled; hfNone: "auto" is not a Hugging Face key here
	strict   bool     // block rows: DeepSpeed parses the block with pydantic (unknown keys forbidden, "auto" dropped)
	enum     []string // allowed string values
	fold     bool     // enum compared case-insensitively
	aliases  []string // other names DeepSpeed accepts for the same field
	optional bool     // block rows: the whole block may be absent or null (None), e.g. offload_optimizer
	rng      valueRange
	note     string // one line for the keys table (docs/deepspeed-keys.md)
}

func (k keySpec) name() string { return k.path[strings.LastIndexByte(k.path, '.')+1:] }

func (k keySpec) parent() string {
	if i := strings.LastIndexByte(k.path, '.'); i >= 0 {
		return k.path[:i]
	}
	return ""
}

// Small constructors keep the table below readable: one line per key.
func blk(path string, st Status, note string) keySpec {
	return keySpec{path: path, kind: kindBlock, status: st, note: note}
}
func pyd(path string, st Status, note string) keySpec { // a pydantic block
	return keySpec{path: path, kind: kindBlock, status: st, strict: true, note: note}
}
func raw(path, note string) keySpec {
	return keySpec{path: path, kind: kindRawBlock, status: NotSupported, note: note}
}
func kb(path string, def any, st Status, note string) keySpec {
	return keySpec{path: path, kind: kindBool, def: def, status: st, note: note}
}

// ki takes its default as configs write sizes (5e8) and stores it as an integer.
func ki(path string, def any, st Status, note string) keySpec {
	if d, ok := def.(float64); ok {
		def = int64(d)
	}
	return keySpec{path: path, kind: kindInt, def: def, status: st, note: note}
}
func kf(path string, def any, st Status, note string) keySpec {
	return keySpec{path: path, kind: kindFloat, def: def, status: st, note: note}
}
func ks(path string, def any, st Status, note string) keySpec {
	return keySpec{path: path, kind: kindString, def: def, status: st, note: note}
}

func (k keySpec) withHF(h hfKey) keySpec { k.hf = h; return k }
func (k keySpec) oneOf(fold bool, vals ...string) keySpec {
	k.enum, k.fold = vals, fold
	return k
}
func (k keySpec) alias(names ...string) keySpec { k.aliases = names; return k }
func (k keySpec) opt() keySpec                  { k.optional = true; return k }
func (k keySpec) in(r valueRange) keySpec       { k.rng = r; return k }

// valueRange is the range a numeric key must fall in; DeepSpeed's pydantic models declare most sizes ge=0.
type valueRange uint8

const (
	anyValue    valueRange = iota
	positive               // > 0
	nonNegative            // >= 0
	unitClosed             // [0, 1]
	unitOpen               // [0, 1): betas
)

// check returns a description of the violated range, or "".
func (r valueRange) check(v float64) string {
	switch r {
	case positive:
		if !(v > 0) {
			return "must be greater than 0"
		}
	case nonNegative:
		if !(v >= 0) {
			return "must not be negative"
		}
	case unitClosed:
		if !(v >= 0 && v <= 1) {
			return "must be between 0 and 1"
		}
	case unitOpen:
		if !(v >= 0 && v < 1) {
			return "must be at least 0 and less than 1"
		}
	}
	return ""
}

func dtypeNames() []string { return []string{"fp32", "fp16", "bf16"} }

// keyTable returns every key gotrain knows, in the order explain and the keys table print them. It is built on each
// call (the package keeps no mutable globals); Load builds it once per file.
func keyTable() []keySpec {
	const maxsize = int64(math.MaxInt64) // sys.maxsize
	return []keySpec{
		ki("train_batch_size", nil, Supported, "micro × gas × data-parallel world size; inferred when missing").withHF(hfTBS),
		ki("train_micro_batch_size_per_gpu", nil, Supported, "samples per rank per micro-step").withHF(hfMicro),
		ki("gradient_accumulation_steps", nil, Supported, "micro-steps per optimizer step").withHF(hfGAS),

		{path: "optimizer", kind: kindBlock, status: Supported, optional: true, note: "absent: AdamW from the train flags (Hugging Face defaults)"},
		ks("optimizer.type", nil, Supported, "Adam/AdamW supported; other DeepSpeed and torch.optim names are parsed and reported"),
		{path: "optimizer.params", kind: kindParams, status: Supported, note: "keys depend on type"},
		kb("optimizer.legacy_fusion", false, Ignored, ""),

		{path: "scheduler", kind: kindBlock, status: Supported, optional: true, note: "absent: constant learning rate"},
		ks("scheduler.type", nil, Supported, "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest"),
		{path: "scheduler.params", kind: kindParams, status: Supported, note: "keys depend on type"},

		blk("fp16", Supported, "legacy alias: none"),
		kb("fp16.enabled", false, Supported, "").withHF(hfFP16),
		kb("fp16.auto_cast", false, Ignored, ""),
		kf("fp16.loss_scale", 0.0, Supported, "0 = dynamic loss scaling").in(nonNegative),
		ki("fp16.initial_scale_power", 16.0, Supported, "initial scale 2^power").in(nonNegative),
		ki("fp16.loss_scale_window", 1000.0, Supported, "").in(positive),
		ki("fp16.hysteresis", 2.0, Supported, "").in(positive),
		kb("fp16.consecutive_hysteresis", false, Supported, ""),
		kf("fp16.min_loss_scale", 1.0, Supported, "").in(positive),
		kb("fp16.fp16_master_weights_and_grads", false, NotSupported, "ZeRO-2 only in DeepSpeed"),

		blk("bf16", Supported, "legacy key bfloat16 is mapped here"),
		kb("bf16.enabled", false, Supported, "").withHF(hfBF16),
		kb("bf16.immediate_grad_update", false, Ignored, ""),
		kb("bf16.check_grad_overflow", false, Ignored, "newer DeepSpeed releases"),
		kb("bf16.bf16_master_weights_and_grads", false, NotSupported, "newer DeepSpeed releases"),

		blk("data_types", Supported, ""),
		ks("data_types.grad_accum_dtype", nil, Supported, "None: the model dtype (fp32 for bf16 without ZeRO)").oneOf(false, dtypeNames()...),

		raw("amp", "apex AMP; incompatible with ZeRO"),

		kf("gradient_clipping", 0.0, Supported, "global L2 norm; 0 disables (DeepSpeed docs say 1.0, the code 0.0)").withHF(hfClip).in(nonNegative),
		ks("communication_data_type", nil, Supported, "None: the model dtype").oneOf(false, dtypeNames()...),
		kb("prescale_gradients", false, NotSupported, ""),
		kf("gradient_predivide_factor", 1.0, NotSupported, "").in(positive),
		kb("sparse_gradients", false, NotSupported, ""),

		pyd("zero_optimization", Supported, "legacy boolean form: true = stage 1"),
		ki("zero_optimization.stage", 0.0, Supported, "0 off, 1 optimizer states, 2 + gradients, 3 + parameters"),
		kb("zero_optimization.contiguous_gradients", true, Supported, ""),
		kb("zero_optimization.overlap_comm", nil, Supported, "None: true for stage 3, false otherwise"),
		kb("zero_optimization.reduce_scatter", true, Supported, ""),
		ki("zero_optimization.reduce_bucket_size", 5e8, Supported, "elements").withHF(hfReduceBucket).in(positive),
		kb("zero_optimization.use_multi_rank_bucket_allreduce", true, Ignored, ""),
		kb("zero_optimization.allgather_partitions", true, Supported, ""),
		ki("zero_optimization.allgather_bucket_size", 5e8, Supported, "elements; stages 1/2: a multiple of 2").in(positive),
		kb("zero_optimization.load_from_fp32_weights", true, Supported, ""),
		kb("zero_optimization.elastic_checkpoint", false, Ignored, "no longer supported by DeepSpeed"),
		pyd("zero_optimization.offload_optimizer", Supported, "None: no offload").opt(),
		ks("zero_optimization.offload_optimizer.device", "none", Supported, "none or cpu; nvme is not supported yet").oneOf(false, "none", "cpu", "nvme"),
		ks("zero_optimization.offload_optimizer.nvme_path", nil, NotSupported, ""),
		kb("zero_optimization.offload_optimizer.pin_memory", false, Supported, ""),
		ki("zero_optimization.offload_optimizer.buffer_count", 4.0, Ignored, "NVMe only").in(positive),
		kb("zero_optimization.offload_optimizer.pipeline_read", false, Ignored, "NVMe only"),
		kb("zero_optimization.offload_optimizer.pipeline_write", false, Ignored, "NVMe only"),
		kb("zero_optimization.offload_optimizer.fast_init", false, Ignored, "NVMe only"),
		kf("zero_optimization.offload_optimizer.ratio", 1.0, NotSupported, "partial offload; needs stage 3").in(unitClosed),
		pyd("zero_optimization.offload_param", Supported, "stage 3 only; None: no offload").opt(),
		ks("zero_optimization.offload_param.device", "none", Supported, "none or cpu; nvme is not supported yet").oneOf(false, "none", "cpu", "nvme"),
		ks("zero_optimization.offload_param.nvme_path", nil, NotSupported, ""),
		ki("zero_optimization.offload_param.buffer_count", 5.0, Ignored, "NVMe only").in(positive),
		ki("zero_optimization.offload_param.buffer_size", 1e8, Ignored, "NVMe only").in(positive),
		ki("zero_optimization.offload_param.max_in_cpu", 1e9, Ignored, "NVMe only").in(nonNegative),
		kb("zero_optimization.offload_param.pin_memory", false, Supported, ""),
		ki("zero_optimization.sub_group_size", 1e9, Supported, "stage 3 optimizer step tile, elements").in(positive),
		ki("zero_optimization.stage3_prefetch_bucket_size", 5e7, Supported, "elements (docs say 5e8, code 5e7)").withHF(hfPrefetchBucket).alias("prefetch_bucket_size").in(nonNegative),
		ki("zero_optimization.stage3_param_persistence_threshold", 1e5, Supported, "parameters with at most this many elements stay whole").withHF(hfPersistence).alias("param_persistence_threshold").in(nonNegative),
		ki("zero_optimization.stage3_model_persistence_threshold", maxsize, Ignored, "").alias("model_persistence_threshold").in(nonNegative),
		ki("zero_optimization.stage3_max_live_parameters", 1e9, Supported, "elements").alias("max_live_parameters").in(nonNegative),
		ki("zero_optimization.stage3_max_reuse_distance", 1e9, Supported, "elements").alias("max_reuse_distance").in(nonNegative),
		kb("zero_optimization.stage3_gather_16bit_weights_on_model_save", false, Supported, "old name stage3_gather_fp16_weights_on_model_save").alias("gather_16bit_weights_on_model_save"),
		ki("zero_optimization.stage3_module_granularity_threshold", 0.0, Ignored, "").alias("module_granularity_threshold").in(nonNegative),
		kb("zero_optimization.stage3_use_all_reduce_for_fetch_params", false, Ignored, "").alias("use_all_reduce_for_fetch_params"),
		kb("zero_optimization.ignore_unused_parameters", true, Ignored, ""),
		kb("zero_optimization.round_robin_gradients", false, Ignored, ""),
		kb("zero_optimization.legacy_stage1", false, NotSupported, "true is an error in DeepSpeed"),
		ki("zero_optimization.zero_hpz_partition_size", 1.0, NotSupported, "ZeRO++ hpZ").in(positive),
		kb("zero_optimization.zero_quantized_weights", false, NotSupported, "ZeRO++ qwZ"),
		kb("zero_optimization.zero_quantized_nontrainable_weights", false, NotSupported, "ZeRO++"),
		kb("zero_optimization.zero_quantized_gradients", false, NotSupported, "ZeRO++ qgZ"),
		pyd("zero_optimization.zeropp_loco_param", NotSupported, "ZeRO++ LoCo").opt(),
		kf("zero_optimization.zeropp_loco_param.err_beta", 0.8, NotSupported, "").in(unitClosed),
		ki("zero_optimization.zeropp_loco_param.reset_T", 1024.0, NotSupported, "").in(positive),
		ki("zero_optimization.mics_shard_size", -1.0, NotSupported, "MiCS"),
		kb("zero_optimization.mics_hierarchical_params_gather", false, NotSupported, "MiCS"),
		kb("zero_optimization.memory_efficient_linear", true, Ignored, ""),
		kb("zero_optimization.override_module_apply", true, Ignored, ""),
		kb("zero_optimization.pipeline_loading_checkpoint", false, Ignored, ""),
		kb("zero_optimization.log_trace_cache_warnings", false, Ignored, ""),

		blk("aio", Ignored, "NVMe offload I/O; NVMe is not supported yet"),
		ki("aio.block_size", 1048576.0, Ignored, "").in(positive),
		ki("aio.queue_depth", 8.0, Ignored, "").in(positive),
		ki("aio.thread_count", 1.0, Ignored, "").in(positive),
		kb("aio.single_submit", false, Ignored, ""),
		kb("aio.overlap_events", true, Ignored, ""),

		blk("activation_checkpointing", Supported, "present: transformer blocks recompute activations in backward"),
		kb("activation_checkpointing.partition_activations", false, Ignored, "model-parallel only"),
		kb("activation_checkpointing.cpu_checkpointing", false, Supported, "kept block inputs live in host memory"),
		kb("activation_checkpointing.contiguous_memory_optimization", false, Ignored, ""),
		ki("activation_checkpointing.number_checkpoints", nil, Ignored, "").in(positive),
		kb("activation_checkpointing.synchronize_checkpoint_boundary", false, Ignored, ""),
		kb("activation_checkpointing.profile", false, Ignored, ""),

		ki("steps_per_print", nil, Supported, "None: no periodic progress line (docs say 10)").in(positive),
		kb("wall_clock_breakdown", false, Ignored, "gotrain always exports step timings as metrics"),
		kb("memory_breakdown", false, Ignored, "gotrain always exports memory by pool as metrics"),
		kb("dump_state", false, Ignored, ""),
		pyd("timers", Ignored, ""),
		pyd("timers.throughput", Ignored, ""),
		kb("timers.throughput.enabled", true, Ignored, "throughput is always measured"),
		kb("timers.throughput.synchronized", true, Ignored, ""),

		pyd("tensorboard", Supported, "event files TensorBoard reads, written by rank 0"),
		kb("tensorboard.enabled", false, Supported, ""),
		ks("tensorboard.output_path", "", Supported, "empty: the run's --output-dir"),
		ks("tensorboard.job_name", "DeepSpeedJobName", Supported, ""),
		pyd("wandb", NotSupported, "not supported (no network)"),
		kb("wandb.enabled", false, NotSupported, ""),
		ks("wandb.group", nil, NotSupported, ""),
		ks("wandb.team", nil, NotSupported, ""),
		ks("wandb.project", "deepspeed", NotSupported, ""),
		pyd("csv_monitor", Supported, "one CSV per metric, DeepSpeed's layout, written by rank 0"),
		kb("csv_monitor.enabled", false, Supported, ""),
		ks("csv_monitor.output_path", "", Supported, "empty: the run's --output-dir"),
		ks("csv_monitor.job_name", "DeepSpeedJobName", Supported, ""),
		pyd("comet", NotSupported, "not supported (no network)"),
		kb("comet.enabled", false, NotSupported, ""),
		ki("comet.samples_log_interval", 100.0, NotSupported, "").in(positive),
		ks("comet.project", nil, NotSupported, ""),
		ks("comet.workspace", nil, NotSupported, ""),
		ks("comet.api_key", nil, NotSupported, ""),
		ks("comet.experiment_name", nil, NotSupported, ""),
		ks("comet.experiment_key", nil, NotSupported, ""),
		kb("comet.online", nil, NotSupported, ""),
		ks("comet.mode", nil, NotSupported, ""),

		blk("flops_profiler", NotSupported, "gotrain exports model FLOPs utilization as a metric"),
		kb("flops_profiler.enabled", false, NotSupported, ""),
		kf("flops_profiler.recompute_fwd_factor", 0.0, NotSupported, "").in(nonNegative),
		ki("flops_profiler.profile_step", 1.0, NotSupported, "").in(positive),
		ki("flops_profiler.module_depth", -1.0, NotSupported, ""),
		ki("flops_profiler.top_modules", 1.0, NotSupported, "").in(positive),
		kb("flops_profiler.detailed", true, NotSupported, ""),
		ks("flops_profiler.output_file", nil, NotSupported, ""),
		pyd("comms_logger", NotSupported, "gotrain exports communication bytes and seconds as metrics"),
		kb("comms_logger.enabled", false, NotSupported, ""),
		kb("comms_logger.verbose", false, NotSupported, ""),
		kb("comms_logger.prof_all", true, NotSupported, ""),
		kb("comms_logger.debug", false, NotSupported, ""),
		{path: "comms_logger.prof_ops", kind: kindStringList, def: []string{}, status: NotSupported},

		blk("checkpoint", Ignored, "gotrain checkpoints are per parameter and always reshardable"),
		ks("checkpoint.tag_validation", "Warn", Ignored, "Warn, Ignore or Fail").oneOf(true, "Warn", "Ignore", "Fail"),
		kb("checkpoint.load_universal", false, Ignored, "every gotrain checkpoint loads on any world size"),
		kb("checkpoint.use_node_local_storage", false, Ignored, ""),
		blk("checkpoint.parallel_write", Ignored, ""),
		kb("checkpoint.parallel_write.pipeline_stage", false, Ignored, ""),

		kb("zero_allow_untested_optimizer", false, Supported, "required for optimizers outside DeepSpeed's ZeRO list"),
		kb("zero_force_ds_cpu_optimizer", true, Ignored, "concerns client optimizers, which gotrain does not take"),
		kb("dataloader_drop_last", false, Ignored, ""),
		ki("vocabulary_size", nil, Ignored, "warned when not a multiple of 8").in(positive),

		blk("curriculum_learning", Supported, "DeepSpeed's legacy seqlen curriculum: each step's samples are cut to the scheduled length (for other curricula: train --stages)"),
		kb("curriculum_learning.enabled", false, Supported, ""),
		ks("curriculum_learning.curriculum_type", nil, Supported, "other types are refused").oneOf(false, "seqlen"),
		ki("curriculum_learning.min_difficulty", nil, Supported, "first sequence length").in(positive),
		ki("curriculum_learning.max_difficulty", nil, Supported, "last sequence length, at most --seq-len").in(positive),
		ks("curriculum_learning.schedule_type", nil, Supported, "").oneOf(false, "fixed_linear", "fixed_root", "fixed_discrete"),
		blk("curriculum_learning.schedule_config", Supported, ""),
		ki("curriculum_learning.schedule_config.total_curriculum_step", nil, Supported, "fixed_linear, fixed_root").in(positive),
		ki("curriculum_learning.schedule_config.difficulty_step", nil, Supported, "fixed_linear, fixed_root: lengths are multiples of it").in(positive),
		ki("curriculum_learning.schedule_config.root_degree", nil, Supported, "fixed_root").in(positive),
		{path: "curriculum_learning.schedule_config.difficulty", kind: kindFloatList, status: Supported, note: "fixed_discrete: the lengths"},
		{path: "curriculum_learning.schedule_config.max_step", kind: kindFloatList, status: Supported, note: "fixed_discrete: the last step of each length but the last"},
		raw("elasticity", ""),
		raw("pipeline", "pipeline parallelism"),
		raw("compression_training", ""),
		raw("sparse_attention", ""),
		raw("hybrid_engine", ""),
		raw("tensor_parallel", ""),
		raw("nebula", ""),
		raw("autotuning", ""),
		raw("data_efficiency", ""),
		raw("progressive_layer_drop", ""),
		raw("eigenvalue", ""),
		{path: "graph_harvesting", kind: kindAny, status: NotSupported},
		{path: "seq_parallel_comm_data_type", kind: kindAny, status: NotSupported},
	}
}

// tableIndex gives access to the table by path and by parent.
type tableIndex struct {
	specs    []keySpec
	byPath   map[string]int
	children map[string][]int // parent path → child rows, in table order
}

func newTableIndex(specs []keySpec) *tableIndex {
	t := &tableIndex{specs: specs, byPath: map[string]int{}, children: map[string][]int{}}
	for i, s := range specs {
		t.byPath[s.path] = i
		t.children[s.parent()] = append(t.children[s.parent()], i)
	}
	return t
}

func (t *tableIndex) spec(path string) (keySpec, bool) {
	i, ok := t.byPath[path]
	if !ok {
		return keySpec{}, false
	}
	return t.specs[i], true
}

// childNames lists the key names allowed directly under block path (with aliases), for suggestions.
func (t *tableIndex) childNames(path string) []string {
	var names []string
	for _, i := range t.children[path] {
		names = append(names, t.specs[i].name())
		names = append(names, t.specs[i].aliases...)
	}
	return names
}
