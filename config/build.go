package config

import (
	"fmt"
	"strings"
)

// build fills the typed Config from the resolved entries.
func (d *decoder) build() *Config {
	c := &Config{File: d.file, entries: d.ents, params: d.params, Other: map[string]string{}}

	c.TrainBatchSize = d.optInt("train_batch_size")
	c.TrainMicroBatchSizePerGPU = d.optInt("train_micro_batch_size_per_gpu")
	c.GradientAccumulationSteps = d.optInt("gradient_accumulation_steps")
	if e := d.ents["train_batch_size"]; e != nil && e.given && e.hf == hfTBS && e.v == nil && e.src.Kind == FromAutoHFDefault {
		ov := d.opts.Overrides
		m := c.TrainMicroBatchSizePerGPU.Or(ov.MicroBatch.Or(hfDefaultMicroBatch))
		g := c.GradientAccumulationSteps.Or(ov.GradAccum.Or(hfDefaultGradAccum))
		c.tbsAuto = Some([2]int{m, g})
	}

	c.Optimizer = d.buildOptimizer()
	c.Scheduler = d.buildScheduler()

	c.FP16 = FP16{
		Enabled:                   d.boolean("fp16.enabled"),
		AutoCast:                  d.boolean("fp16.auto_cast"),
		LossScale:                 d.float("fp16.loss_scale"),
		InitialScalePower:         d.intv("fp16.initial_scale_power"),
		LossScaleWindow:           d.intv("fp16.loss_scale_window"),
		Hysteresis:                d.intv("fp16.hysteresis"),
		ConsecutiveHysteresis:     d.boolean("fp16.consecutive_hysteresis"),
		MinLossScale:              d.float("fp16.min_loss_scale"),
		FP16MasterWeightsAndGrads: d.boolean("fp16.fp16_master_weights_and_grads"),
	}
	for _, k := range []string{"initial_scale_power", "loss_scale_window", "hysteresis", "consecutive_hysteresis", "min_loss_scale"} {
		c.FP16.DynamicLossArgsGiven = c.FP16.DynamicLossArgsGiven || d.given("fp16."+k)
	}
	c.BF16 = BF16{
		Enabled:                   d.boolean("bf16.enabled"),
		ImmediateGradUpdate:       d.boolean("bf16.immediate_grad_update"),
		CheckGradOverflow:         d.boolean("bf16.check_grad_overflow"),
		BF16MasterWeightsAndGrads: d.boolean("bf16.bf16_master_weights_and_grads"),
	}
	c.DataTypes = DataTypes{GradAccumDtype: d.optStr("data_types.grad_accum_dtype")}
	c.AMP = d.buildAMP()
	c.GradientClipping = d.float("gradient_clipping")
	c.CommunicationDataType = d.optStr("communication_data_type")
	c.PrescaleGradients = d.boolean("prescale_gradients")
	c.GradientPredivideFactor = d.float("gradient_predivide_factor")
	c.SparseGradients = d.boolean("sparse_gradients")

	c.ZeRO = d.buildZeRO()
	c.AIO = AIO{
		BlockSize:     d.intv("aio.block_size"),
		QueueDepth:    d.intv("aio.queue_depth"),
		ThreadCount:   d.intv("aio.thread_count"),
		SingleSubmit:  d.boolean("aio.single_submit"),
		OverlapEvents: d.boolean("aio.overlap_events"),
	}
	c.ActivationCheckpointing = ActivationCheckpointing{
		Present:                       d.given("activation_checkpointing"),
		PartitionActivations:          d.boolean("activation_checkpointing.partition_activations"),
		CPUCheckpointing:              d.boolean("activation_checkpointing.cpu_checkpointing"),
		ContiguousMemoryOptimization:  d.boolean("activation_checkpointing.contiguous_memory_optimization"),
		NumberCheckpoints:             d.optInt("activation_checkpointing.number_checkpoints"),
		SynchronizeCheckpointBoundary: d.boolean("activation_checkpointing.synchronize_checkpoint_boundary"),
		Profile:                       d.boolean("activation_checkpointing.profile"),
	}

	c.StepsPerPrint = d.optInt("steps_per_print")
	c.WallClockBreakdown = d.boolean("wall_clock_breakdown")
	c.MemoryBreakdown = d.boolean("memory_breakdown")
	c.DumpState = d.boolean("dump_state")
	c.Timers = Timers{
		ThroughputEnabled:      d.boolean("timers.throughput.enabled"),
		ThroughputSynchronized: d.boolean("timers.throughput.synchronized"),
	}
	c.TensorBoard = Monitor{
		Enabled:    d.boolean("tensorboard.enabled"),
		OutputPath: d.str("tensorboard.output_path"),
		JobName:    d.str("tensorboard.job_name"),
	}
	c.WandB = WandB{
		Enabled: d.boolean("wandb.enabled"),
		Group:   d.optStr("wandb.group"),
		Team:    d.optStr("wandb.team"),
		Project: d.str("wandb.project"),
	}
	c.CSVMonitor = Monitor{
		Enabled:    d.boolean("csv_monitor.enabled"),
		OutputPath: d.str("csv_monitor.output_path"),
		JobName:    d.str("csv_monitor.job_name"),
	}
	c.Comet = Comet{
		Enabled:            d.boolean("comet.enabled"),
		SamplesLogInterval: d.intv("comet.samples_log_interval"),
		Project:            d.optStr("comet.project"),
		Workspace:          d.optStr("comet.workspace"),
		APIKey:             d.optStr("comet.api_key"),
		ExperimentName:     d.optStr("comet.experiment_name"),
		ExperimentKey:      d.optStr("comet.experiment_key"),
		Online:             d.optBool("comet.online"),
		Mode:               d.optStr("comet.mode"),
	}
	c.FlopsProfiler = FlopsProfiler{
		Enabled:            d.boolean("flops_profiler.enabled"),
		RecomputeFwdFactor: d.float("flops_profiler.recompute_fwd_factor"),
		ProfileStep:        d.intv("flops_profiler.profile_step"),
		ModuleDepth:        d.intv("flops_profiler.module_depth"),
		TopModules:         d.intv("flops_profiler.top_modules"),
		Detailed:           d.boolean("flops_profiler.detailed"),
		OutputFile:         d.optStr("flops_profiler.output_file"),
	}
	ops, _ := d.val("comms_logger.prof_ops").([]string)
	c.CommsLogger = CommsLogger{
		Enabled: d.boolean("comms_logger.enabled"),
		Verbose: d.boolean("comms_logger.verbose"),
		ProfAll: d.boolean("comms_logger.prof_all"),
		Debug:   d.boolean("comms_logger.debug"),
		ProfOps: append([]string(nil), ops...),
	}
	c.Checkpoint = Checkpoint{
		TagValidation:       canonicalTag(d.str("checkpoint.tag_validation")),
		LoadUniversal:       d.boolean("checkpoint.load_universal"),
		UseNodeLocalStorage: d.boolean("checkpoint.use_node_local_storage"),
		ParallelWriteStage:  d.boolean("checkpoint.parallel_write.pipeline_stage"),
	}
	c.ZeroAllowUntestedOptimizer = d.boolean("zero_allow_untested_optimizer")
	c.ZeroForceDSCPUOptimizer = d.boolean("zero_force_ds_cpu_optimizer")
	c.DataloaderDropLast = d.boolean("dataloader_drop_last")
	c.VocabularySize = d.optInt("vocabulary_size")
	c.Curriculum = d.buildCurriculum()

	for _, s := range d.tab.specs {
		if s.kind != kindRawBlock && s.kind != kindAny || s.path == "amp" {
			continue
		}
		if n, ok := d.val(s.path).(*node); ok {
			c.Other[s.path] = n.compact()
		}
	}
	return c
}

// canonicalTag spells tag_validation as DeepSpeed's enum does; the file may use any case.
func canonicalTag(s string) string {
	for _, t := range []string{"Warn", "Ignore", "Fail"} {
		if strings.EqualFold(s, t) {
			return t
		}
	}
	return s
}

func (d *decoder) buildAMP() AMP {
	a := AMP{Params: map[string]string{}}
	n, _ := d.val("amp").(*node)
	if n == nil {
		return a
	}
	for i, k := range n.keys {
		if k == "enabled" {
			if n.vals[i].kind == nodeBool {
				a.Enabled = n.vals[i].b
			} else if !n.vals[i].isAuto() {
				d.errNode(n.vals[i], "amp.enabled", fmt.Sprintf("expected true or false, got %s", describeNode(n.vals[i])), "write true or false")
			}
			continue
		}
		a.Params[k] = n.vals[i].compact()
	}
	return a
}

func (d *decoder) buildZeRO() ZeRO {
	const z = "zero_optimization."
	zr := ZeRO{
		Stage:                               d.intv(z + "stage"),
		ContiguousGradients:                 d.boolean(z + "contiguous_gradients"),
		ReduceScatter:                       d.boolean(z + "reduce_scatter"),
		ReduceBucketSize:                    d.int64v(z + "reduce_bucket_size"),
		UseMultiRankBucketAllreduce:         d.boolean(z + "use_multi_rank_bucket_allreduce"),
		AllgatherPartitions:                 d.boolean(z + "allgather_partitions"),
		AllgatherBucketSize:                 d.int64v(z + "allgather_bucket_size"),
		LoadFromFP32Weights:                 d.boolean(z + "load_from_fp32_weights"),
		ElasticCheckpoint:                   d.boolean(z + "elastic_checkpoint"),
		SubGroupSize:                        d.int64v(z + "sub_group_size"),
		Stage3PrefetchBucketSize:            d.int64v(z + "stage3_prefetch_bucket_size"),
		Stage3ParamPersistenceThreshold:     d.int64v(z + "stage3_param_persistence_threshold"),
		Stage3ModelPersistenceThreshold:     d.int64v(z + "stage3_model_persistence_threshold"),
		Stage3MaxLiveParameters:             d.int64v(z + "stage3_max_live_parameters"),
		Stage3MaxReuseDistance:              d.int64v(z + "stage3_max_reuse_distance"),
		Stage3Gather16BitWeightsOnModelSave: d.boolean(z + "stage3_gather_16bit_weights_on_model_save"),
		Stage3ModuleGranularityThreshold:    d.int64v(z + "stage3_module_granularity_threshold"),
		Stage3UseAllReduceForFetchParams:    d.boolean(z + "stage3_use_all_reduce_for_fetch_params"),
		IgnoreUnusedParameters:              d.boolean(z + "ignore_unused_parameters"),
		RoundRobinGradients:                 d.boolean(z + "round_robin_gradients"),
		LegacyStage1:                        d.boolean(z + "legacy_stage1"),
		ZeroHpzPartitionSize:                d.intv(z + "zero_hpz_partition_size"),
		ZeroQuantizedWeights:                d.boolean(z + "zero_quantized_weights"),
		ZeroQuantizedNontrainableWeights:    d.boolean(z + "zero_quantized_nontrainable_weights"),
		ZeroQuantizedGradients:              d.boolean(z + "zero_quantized_gradients"),
		MicsShardSize:                       d.intv(z + "mics_shard_size"),
		MicsHierarchicalParamsGather:        d.boolean(z + "mics_hierarchical_params_gather"),
		MemoryEfficientLinear:               d.boolean(z + "memory_efficient_linear"),
		OverrideModuleApply:                 d.boolean(z + "override_module_apply"),
		PipelineLoadingCheckpoint:           d.boolean(z + "pipeline_loading_checkpoint"),
		LogTraceCacheWarnings:               d.boolean(z + "log_trace_cache_warnings"),
	}
	// overlap_comm is None by default and DeepSpeed resolves it by stage.
	if v, ok := d.optBool(z + "overlap_comm").Get(); ok {
		zr.OverlapComm = v
	} else {
		zr.OverlapComm = zr.Stage == 3
		if e := d.ents[z+"overlap_comm"]; e != nil {
			e.v = zr.OverlapComm
			e.src = Source{Kind: FromInferred, Note: "true for stage 3, false otherwise"}
		}
	}
	if d.present(z + "offload_optimizer") {
		zr.OffloadOptimizer = &OffloadOptimizer{
			Device:        d.str(z + "offload_optimizer.device"),
			NVMePath:      d.optStr(z + "offload_optimizer.nvme_path"),
			PinMemory:     d.boolean(z + "offload_optimizer.pin_memory"),
			BufferCount:   d.intv(z + "offload_optimizer.buffer_count"),
			PipelineRead:  d.boolean(z + "offload_optimizer.pipeline_read"),
			PipelineWrite: d.boolean(z + "offload_optimizer.pipeline_write"),
			FastInit:      d.boolean(z + "offload_optimizer.fast_init"),
			Ratio:         d.float(z + "offload_optimizer.ratio"),
		}
	}
	if d.present(z + "offload_param") {
		zr.OffloadParam = &OffloadParam{
			Device:      d.str(z + "offload_param.device"),
			NVMePath:    d.optStr(z + "offload_param.nvme_path"),
			BufferCount: d.intv(z + "offload_param.buffer_count"),
			BufferSize:  d.int64v(z + "offload_param.buffer_size"),
			MaxInCPU:    d.int64v(z + "offload_param.max_in_cpu"),
			PinMemory:   d.boolean(z + "offload_param.pin_memory"),
		}
	}
	if d.present(z + "zeropp_loco_param") {
		zr.ZeroppLocoParam = &LocoParam{
			ErrBeta: d.float(z + "zeropp_loco_param.err_beta"),
			ResetT:  d.intv(z + "zeropp_loco_param.reset_T"),
		}
	}
	return zr
}

// present reports whether an optional block was decoded (given in the file as an object).
func (d *decoder) present(path string) bool {
	d.read[path] = true
	_, ok := d.ents[path+"."+d.tab.specs[d.tab.children[path][0]].name()]
	return ok
}

func (d *decoder) buildOptimizer() Optimizer {
	const p = "optimizer.params."
	e := d.ents["optimizer"]
	if e == nil || e.src.Kind == FromGotrain {
		return d.defaultOptimizer()
	}
	typ := d.str("optimizer.type")
	canonical, torch, _ := optimizerKind(typ)
	o := Optimizer{
		Type:         canonical,
		Written:      typ,
		Torch:        torch,
		Supported:    !torch && (canonical == "adam" || canonical == "adamw"),
		LegacyFusion: d.boolean("optimizer.legacy_fusion"),
		Params:       map[string]any{},
	}
	for _, s := range d.params["optimizer.params"] {
		o.Params[s.name()] = d.val(p + s.name())
	}
	o.LR = d.float(p + "lr")
	if b, ok := o.Params["betas"].([]float64); ok && len(b) == 2 {
		o.Betas = [2]float64{b[0], b[1]}
	}
	o.Eps = d.float(p + "eps")
	o.WeightDecay = d.float(p + "weight_decay")
	o.BiasCorrection = d.boolean(p + "bias_correction")
	// DeepSpeed: "AdamW" forces decoupled decay; "Adam" is AdamW unless adam_w_mode is false.
	o.AdamWMode = canonical == "adamw" || (canonical == "adam" && d.boolean(p+"adam_w_mode"))
	return o
}

// defaultOptimizer is the AdamW gotrain trains with when the file has no optimizer block: the Hugging Face
// Trainer's own optimizer, from the overrides or TrainingArguments defaults.
func (d *decoder) defaultOptimizer() Optimizer {
	ov := d.opts.Overrides
	b := ov.Betas.Or([2]float64{hfDefaultBeta1, hfDefaultBeta2})
	o := Optimizer{
		Type: "adamw", Written: "AdamW", Supported: true, Default: true,
		LR: ov.LR.Or(hfDefaultLR), Betas: b, Eps: ov.Eps.Or(hfDefaultEps), WeightDecay: ov.WeightDecay.Or(hfDefaultWeightDecay),
		AdamWMode: true, BiasCorrection: true,
	}
	o.Params = map[string]any{"lr": o.LR, "betas": []float64{b[0], b[1]}, "eps": o.Eps, "weight_decay": o.WeightDecay}
	return o
}

func (d *decoder) buildScheduler() *Scheduler {
	const p = "scheduler.params."
	e := d.ents["scheduler"]
	if e == nil || !e.given {
		return d.hfSched
	}
	typ := d.str("scheduler.type")
	s := &Scheduler{Type: typ, Torch: isTorchScheduler(typ), Supported: isDSScheduler(typ), Raw: map[string]any{}}
	if s.Torch {
		for path, e := range d.ents {
			if strings.HasPrefix(path, p) {
				s.Raw[strings.TrimPrefix(path, p)] = e.v
			}
		}
		return s
	}
	for _, ps := range d.params["scheduler.params"] {
		s.Raw[ps.name()] = d.val(p + ps.name())
	}
	s.Params = SchedulerParams{
		WarmupMinLR:           d.float(p + "warmup_min_lr"),
		WarmupMaxLR:           d.float(p + "warmup_max_lr"),
		WarmupNumSteps:        d.intv(p + "warmup_num_steps"),
		WarmupType:            d.str(p + "warmup_type"),
		TotalNumSteps:         d.intv(p + "total_num_steps"),
		WarmupMinRatio:        d.float(p + "warmup_min_ratio"),
		CosMinRatio:           d.float(p + "cos_min_ratio"),
		CycleMinLR:            d.float(p + "cycle_min_lr"),
		CycleMaxLR:            d.float(p + "cycle_max_lr"),
		DecayLRRate:           d.float(p + "decay_lr_rate"),
		CycleFirstStepSize:    d.intv(p + "cycle_first_step_size"),
		CycleSecondStepSize:   d.optInt(p + "cycle_second_step_size"),
		CycleFirstStairCount:  d.intv(p + "cycle_first_stair_count"),
		CycleSecondStairCount: d.optInt(p + "cycle_second_stair_count"),
		DecayStepSize:         d.intv(p + "decay_step_size"),
		CycleMomentum:         d.boolean(p + "cycle_momentum"),
		CycleMinMom:           d.float(p + "cycle_min_mom"),
		CycleMaxMom:           d.float(p + "cycle_max_mom"),
		DecayMomRate:          d.float(p + "decay_mom_rate"),
		LRRangeTestMinLR:      d.float(p + "lr_range_test_min_lr"),
		LRRangeTestStepSize:   d.intv(p + "lr_range_test_step_size"),
		LRRangeTestStepRate:   d.float(p + "lr_range_test_step_rate"),
		LRRangeTestStaircase:  d.boolean(p + "lr_range_test_staircase"),
		LastBatchIteration:    d.intv(p + "last_batch_iteration"),
	}
	return s
}
