package config

// Config is a DeepSpeed config after parsing, deprecated-key mapping, "auto" resolution and validation. Every key
// of the file has a typed home here; keys the file leaves out hold DeepSpeed's code defaults. Values DeepSpeed
// treats as None are Opt. A Config is a plain value: it is not safe to mutate from several goroutines at once,
// and Explain reads the origin of each value from the Config that Load or Parse produced.
type Config struct {
	File string // file name as given to Load or Parse

	// Batch triangle as written (after "auto"); Resolve infers the missing ones for a world size.
	TrainBatchSize            Opt[int]
	TrainMicroBatchSizePerGPU Opt[int]
	GradientAccumulationSteps Opt[int]

	Optimizer Optimizer  // never nil-like: with no optimizer block, gotrain's AdamW (Optimizer.Default)
	Scheduler *Scheduler // nil: no scheduler block (nor --lr-scheduler-type), constant learning rate

	FP16                    FP16
	BF16                    BF16
	DataTypes               DataTypes
	AMP                     AMP
	GradientClipping        float64     // global L2 norm; 0 disables
	CommunicationDataType   Opt[string] // "fp32", "fp16" or "bf16"; None: the model dtype
	PrescaleGradients       bool
	GradientPredivideFactor float64
	SparseGradients         bool

	ZeRO                    ZeRO
	AIO                     AIO
	ActivationCheckpointing ActivationCheckpointing

	StepsPerPrint      Opt[int] // None: no periodic progress line
	WallClockBreakdown bool
	MemoryBreakdown    bool
	DumpState          bool
	Timers             Timers
	TensorBoard        Monitor
	WandB              WandB
	CSVMonitor         Monitor
	Comet              Comet
	FlopsProfiler      FlopsProfiler
	CommsLogger        CommsLogger
	Checkpoint         Checkpoint

	ZeroAllowUntestedOptimizer bool
	ZeroForceDSCPUOptimizer    bool
	DataloaderDropLast         bool
	VocabularySize             Opt[int]
	Curriculum                 Curriculum // "curriculum_learning"

	// Other holds the known blocks gotrain keeps as raw JSON (elasticity, pipeline, compression_training,
	// sparse_attention, hybrid_engine, tensor_parallel, nebula, autotuning, data_efficiency,
	// progressive_layer_drop, eigenvalue, graph_harvesting, seq_parallel_comm_data_type), by key, compact JSON.
	Other map[string]string

	// Warnings found while loading (deprecated keys, lenient unknown keys, unsupported features, ...).
	Warnings []Warning

	entries     map[string]*entry      // every resolved key with its origin, for Explain
	params      map[string][]paramSpec // the parameter tables used for optimizer.params and scheduler.params
	tbsAuto     Opt[[2]int]            // train_batch_size "auto": the (micro, gas) factors Hugging Face multiplies by world size
	unsupported []string               // see Unsupported
}

// Optimizer is the "optimizer" block. For Adam and AdamW the common fields are typed; Params holds every
// parameter of the type's table (given or default) for all types.
type Optimizer struct {
	Type      string // as DeepSpeed resolves it: lower-case DeepSpeed name ("adamw"), or a torch.optim class ("SGD")
	Written   string // the type as written in the file
	Torch     bool   // a torch.optim class rather than a DeepSpeed optimizer
	Supported bool   // gotrain implements it (Adam, AdamW)
	Default   bool   // the file has no optimizer block: AdamW from the overrides and Hugging Face defaults

	LR          float64
	Betas       [2]float64
	Eps         float64
	WeightDecay float64
	// AdamWMode is DeepSpeed's effective decoupled-weight-decay switch: true for "AdamW", and for "Adam" unless
	// adam_w_mode is false.
	AdamWMode      bool
	BiasCorrection bool
	LegacyFusion   bool

	Params map[string]any // name → bool, int64, float64, string, []float64 or nil (None)
}

// Scheduler is the "scheduler" block.
type Scheduler struct {
	Type      string // as written; DeepSpeed matches scheduler names case-sensitively
	Torch     bool   // a torch.optim.lr_scheduler class
	Supported bool   // one of DeepSpeed's five schedulers, all implemented by gotrain, or HF
	Params    SchedulerParams
	Raw       map[string]any // every parameter by name (torch schedulers: as written)
	// HF marks Hugging Face Trainer's schedule (Type one of HFSchedulerNames), which a config without a
	// scheduler block gets from Overrides.LRScheduler; Params has its WarmupNumSteps and TotalNumSteps.
	HF bool
}

// SchedulerParams is the union of the parameters of DeepSpeed's schedulers (§1.3); fields a type does not use
// keep that type's zero value. Defaults are DeepSpeed's.
type SchedulerParams struct {
	// WarmupLR, WarmupDecayLR
	WarmupMinLR float64
	WarmupMaxLR float64
	// WarmupLR, WarmupDecayLR, WarmupCosineLR
	WarmupNumSteps int
	WarmupType     string // "log" or "linear"
	TotalNumSteps  int    // WarmupDecayLR, WarmupCosineLR
	// WarmupCosineLR
	WarmupMinRatio float64
	CosMinRatio    float64
	// OneCycle
	CycleMinLR            float64
	CycleMaxLR            float64
	DecayLRRate           float64
	CycleFirstStepSize    int
	CycleSecondStepSize   Opt[int] // None: equal to CycleFirstStepSize
	CycleFirstStairCount  int
	CycleSecondStairCount Opt[int]
	DecayStepSize         int
	CycleMomentum         bool
	CycleMinMom           float64
	CycleMaxMom           float64
	DecayMomRate          float64
	// LRRangeTest
	LRRangeTestMinLR     float64
	LRRangeTestStepSize  int
	LRRangeTestStepRate  float64
	LRRangeTestStaircase bool

	LastBatchIteration int
}

// FP16 is the "fp16" block: dynamic loss scaling unless LossScale is non-zero.
type FP16 struct {
	Enabled                   bool
	AutoCast                  bool
	LossScale                 float64 // 0: dynamic
	InitialScalePower         int     // initial dynamic scale 2^InitialScalePower
	LossScaleWindow           int
	Hysteresis                int
	ConsecutiveHysteresis     bool
	MinLossScale              float64
	FP16MasterWeightsAndGrads bool
	DynamicLossArgsGiven      bool // the block sets a dynamic-scaler key (matters for DeepSpeed's ZeRO quirk, §1.4)
}

// BF16 is the "bf16" block (legacy name "bfloat16").
type BF16 struct {
	Enabled                   bool
	ImmediateGradUpdate       bool
	CheckGradOverflow         bool
	BF16MasterWeightsAndGrads bool
}

// DataTypes is the "data_types" block.
type DataTypes struct {
	GradAccumDtype Opt[string] // "fp32", "fp16", "bf16"; None: the model dtype
}

// AMP is the "amp" block; everything but "enabled" is passed to apex by DeepSpeed and kept raw here.
type AMP struct {
	Enabled bool
	Params  map[string]string // key → compact JSON
}

// ZeRO is the "zero_optimization" block.
type ZeRO struct {
	Stage                               int
	ContiguousGradients                 bool
	OverlapComm                         bool // resolved: the file's value, else true for stage 3 and false otherwise
	ReduceScatter                       bool
	ReduceBucketSize                    int64 // elements
	UseMultiRankBucketAllreduce         bool
	AllgatherPartitions                 bool
	AllgatherBucketSize                 int64 // elements
	LoadFromFP32Weights                 bool
	ElasticCheckpoint                   bool
	OffloadOptimizer                    *OffloadOptimizer // nil: None
	OffloadParam                        *OffloadParam     // nil: None
	SubGroupSize                        int64
	Stage3PrefetchBucketSize            int64
	Stage3ParamPersistenceThreshold     int64
	Stage3ModelPersistenceThreshold     int64
	Stage3MaxLiveParameters             int64
	Stage3MaxReuseDistance              int64
	Stage3Gather16BitWeightsOnModelSave bool
	Stage3ModuleGranularityThreshold    int64
	Stage3UseAllReduceForFetchParams    bool
	IgnoreUnusedParameters              bool
	RoundRobinGradients                 bool
	LegacyStage1                        bool
	ZeroHpzPartitionSize                int
	ZeroQuantizedWeights                bool
	ZeroQuantizedNontrainableWeights    bool
	ZeroQuantizedGradients              bool
	ZeroppLocoParam                     *LocoParam // nil: None
	MicsShardSize                       int
	MicsHierarchicalParamsGather        bool
	MemoryEfficientLinear               bool
	OverrideModuleApply                 bool
	PipelineLoadingCheckpoint           bool
	LogTraceCacheWarnings               bool
}

// OffloadOptimizer is zero_optimization.offload_optimizer.
type OffloadOptimizer struct {
	Device        string // "none", "cpu" or "nvme"
	NVMePath      Opt[string]
	PinMemory     bool
	BufferCount   int
	PipelineRead  bool
	PipelineWrite bool
	FastInit      bool
	Ratio         float64
}

// OffloadParam is zero_optimization.offload_param.
type OffloadParam struct {
	Device      string // "none", "cpu" or "nvme"
	NVMePath    Opt[string]
	BufferCount int
	BufferSize  int64
	MaxInCPU    int64
	PinMemory   bool
}

// LocoParam is zero_optimization.zeropp_loco_param.
type LocoParam struct {
	ErrBeta float64
	ResetT  int
}

// AIO is the "aio" block (NVMe I/O).
type AIO struct {
	BlockSize     int
	QueueDepth    int
	ThreadCount   int
	SingleSubmit  bool
	OverlapEvents bool
}

// ActivationCheckpointing is the "activation_checkpointing" block.
type ActivationCheckpointing struct {
	Present                       bool // the block appears in the file
	PartitionActivations          bool
	CPUCheckpointing              bool
	ContiguousMemoryOptimization  bool
	NumberCheckpoints             Opt[int]
	SynchronizeCheckpointBoundary bool
	Profile                       bool
}

// Timers is the "timers" block.
type Timers struct {
	ThroughputEnabled      bool
	ThroughputSynchronized bool
}

// Monitor is the "tensorboard" and "csv_monitor" blocks.
type Monitor struct {
	Enabled    bool
	OutputPath string
	JobName    string
}

// WandB is the "wandb" block.
type WandB struct {
	Enabled bool
	Group   Opt[string]
	Team    Opt[string]
	Project string
}

// Comet is the "comet" block.
type Comet struct {
	Enabled            bool
	SamplesLogInterval int
	Project            Opt[string]
	Workspace          Opt[string]
	APIKey             Opt[string]
	ExperimentName     Opt[string]
	ExperimentKey      Opt[string]
	Online             Opt[bool]
	Mode               Opt[string]
}

// FlopsProfiler is the "flops_profiler" block.
type FlopsProfiler struct {
	Enabled            bool
	RecomputeFwdFactor float64
	ProfileStep        int
	ModuleDepth        int
	TopModules         int
	Detailed           bool
	OutputFile         Opt[string]
}

// CommsLogger is the "comms_logger" block.
type CommsLogger struct {
	Enabled bool
	Verbose bool
	ProfAll bool
	Debug   bool
	ProfOps []string
}

// Checkpoint is the "checkpoint" block.
type Checkpoint struct {
	TagValidation       string // "Warn", "Ignore" or "Fail" (canonical spelling)
	LoadUniversal       bool
	UseNodeLocalStorage bool
	ParallelWriteStage  bool // parallel_write.pipeline_stage
}

// SourceKind says where a resolved value came from.
type SourceKind uint8

const (
	FromDefault       SourceKind = iota // DeepSpeed's code default: the key is absent
	FromFile                            // written in the file
	FromAutoOverride                    // "auto", filled from an override (a train flag)
	FromAutoHFDefault                   // "auto", no override: the Hugging Face TrainingArguments default
	FromAutoDropped                     // "auto" in a block DeepSpeed parses strictly: DeepSpeed's default
	FromDeprecated                      // written under a deprecated name and mapped
	FromInferred                        // computed by DeepSpeed's rules (batch inference, overlap_comm by stage)
	FromRun                             // a required key missing from the file, taken from the run (total steps)
	FromGotrain                         // gotrain's choice where DeepSpeed has none (no optimizer block)
	// FromRunTime is "auto" (or a required key left out) whose value only the run knows: the run length, the
	// model width. Validate and explain, which have no run, check it with the value the run would take by
	// default (DefaultMaxSteps, DeepSpeed's default bucket sizes); Note names where the run takes it from.
	FromRunTime
)

// Source is the origin of one resolved value, with a short human note ("learning_rate=5e-05", "cpu_offload").
type Source struct {
	Kind SourceKind
	Note string
}

func (s Source) String() string {
	switch s.Kind {
	case FromDefault:
		return "default"
	case FromFile:
		return "file"
	case FromAutoOverride:
		return "auto: " + s.Note
	case FromAutoHFDefault:
		return "auto: Hugging Face default " + s.Note
	case FromAutoDropped:
		if s.Note != "" {
			return "auto: DeepSpeed default, " + s.Note
		}
		return "auto: DeepSpeed default"
	case FromDeprecated:
		return "deprecated " + s.Note
	case FromInferred:
		return "inferred: " + s.Note
	case FromRun:
		return "from the run: " + s.Note
	case FromRunTime:
		return "auto → filled at run time from " + s.Note
	default:
		return "gotrain default: " + s.Note
	}
}

// Source returns where the value of a key path came from (for example "zero_optimization.stage");
// ok is false for paths the file and the key table do not have.
func (c *Config) Source(path string) (Source, bool) {
	e, ok := c.entries[path]
	if !ok {
		return Source{}, false
	}
	return e.src, true
}
