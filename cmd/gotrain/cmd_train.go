package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/tcp"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/configs"
	"github.com/gotrain/gotrain/costmodel"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

func trainCommand() *cli.Command {
	return &cli.Command{
		Name:  "train",
		Usage: "train or fine-tune a GPT-2 or Llama-family model with a DeepSpeed config (also: gotrain --config FILE ...)",
		UsageText: "gotrain train --config ds_config.json --model gpt2-tiny --data 'data/train_*.bin' [flags]\n" +
			"   gotrain train --config configs/ds_zero3.json --init-from ./Qwen3-0.6B --data 'data/train_*.bin' [flags]",
		Description: "Trains for --max-steps optimizer steps. Batch sizes, gradient accumulation, optimizer,\n" +
			"scheduler and clipping come from the DeepSpeed config; \"auto\" values come from the flags below\n" +
			"(Hugging Face semantics). Writes <output-dir>/metrics.jsonl, one JSON line per step, and at the end\n" +
			"<output-dir> as a Hugging Face snapshot: config.json and model.safetensors (shards above 5 GB),\n" +
			"with the tokenizer files of the snapshot it started from.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"deepspeed_config", "deepspeed"}, Usage: "DeepSpeed JSON config `FILE` (default: the embedded " + configs.Default + ")"},
			&cli.StringFlag{Name: "model", Value: "gpt2-tiny", Usage: "model preset (" + strings.Join(model.PresetNames(), ", ") + "), a Hugging Face snapshot `DIR` or its config.json (default: --init-from's model, else gpt2-tiny)"},
			&cli.StringSliceFlag{Name: "data", Usage: "training token shards: `PATH`s or globs (gotrain data prepare writes them); required unless --stages; synthetic[:V] for random token ids (a smoke test of the whole path without data)"},
			&cli.StringSliceFlag{Name: "val-data", Usage: "validation token shards: `PATH`s or globs"},
			&cli.IntFlag{Name: "seq-len", Value: 256, Usage: "sequence length `T` (at most the model's n_positions)"},
			&cli.IntFlag{Name: "max-steps", Value: config.DefaultMaxSteps, Usage: "optimizer steps to run (fills scheduler total_num_steps: \"auto\")"},
			&cli.StringFlag{Name: "output-dir", Value: "out", Usage: "`DIR` for metrics.jsonl and model.safetensors"},
			&cli.StringFlag{Name: "init-from", Usage: "start from weights: a Hugging Face snapshot `DIR` (model.safetensors or shards with model.safetensors.index.json; F32, BF16 or F16), a model.safetensors file or an llm.c .bin file"},
			&cli.Uint64Flag{Name: "seed", Value: 1337, Usage: "random seed for the initial weights"},
			&cli.IntFlag{Name: "eval-every", Value: 0, Usage: "evaluate on --val-data every `N` steps (0: only before and after training)"},
			&cli.IntFlag{Name: "eval-batch-size", Aliases: []string{"per_device_eval_batch_size"}, Usage: "validation samples per rank in one forward (0: the micro-batch size; larger needs more activation memory than the estimate shows)"},
			&cli.IntFlag{Name: "eval-batches", Usage: "cap an evaluation at `N` batches, evenly spaced over --val-data (0: score every validation row or token window once)"},
			&cli.BoolFlag{Name: "gradient-checkpointing", Aliases: []string{"gradient_checkpointing"}, Usage: "recompute each block in backward instead of keeping its activations (also on when the config has an activation_checkpointing block)"},
			&cli.BoolFlag{Name: "pack", Usage: "read rows with loss masks (instruction and chat data) as one token stream of full T-token samples (attention crosses row boundaries) instead of one padded sample per row"},
			&cli.Float64Flag{Name: "num-train-epochs", Aliases: []string{"num_train_epochs"}, Usage: "train for this many passes over --data instead of --max-steps (steps = ceil(E × ⌊micro-batches per epoch / gradient accumulation⌋), as Hugging Face's Trainer; fills total_num_steps: \"auto\")"},
			&cli.StringFlag{Name: "stages", Usage: "train a curriculum: a JSON `FILE` {\"stages\": [{\"name\", \"data\", \"seq_len\", \"steps\" or \"epochs\", \"lr_scale\", \"val_data\", \"pack\"}, ...]} run in order as one run (steps numbered across stages, optimizer and schedule continued, a checkpoint at each stage's end); replaces --data, --seq-len, --max-steps and --num-train-epochs"},
			&cli.BoolFlag{Name: "shuffle", Usage: "visit shards and batches in a seeded random order each epoch (default: llm.c's sequential order)"},
			&cli.StringFlag{Name: "device", Value: "auto", Usage: "cpu, cuda or auto (cuda when a GPU and its libraries are present)"},
			&cli.IntFlag{Name: "threads", Usage: "CPU threads for the CPU backend and BLAS (0: all cores)"},
			&cli.BoolFlag{Name: "allow-tf32", Usage: "let fp32 GEMMs on the GPU run on TF32 tensor cores (PyTorch's allow_tf32; off: true fp32, as the CPU)"},
			&cli.Float64Flag{Name: "peak-flops", Usage: "peak FLOP/s of one rank for MFU (0: measure the sgemm roofline at start-up)"},
			&cli.BoolFlag{Name: "allow-unknown-keys", Usage: "treat unknown DeepSpeed keys as warnings instead of errors"},
			&cli.IntFlag{Name: "log-every", Usage: "print a progress line every `N` steps (0: the config's steps_per_print, else 10)"},
			&cli.IntFlag{Name: "save-every", Usage: "save a checkpoint every `N` steps (always at the end and on SIGTERM/Ctrl-C)"},
			&cli.IntFlag{Name: "save-total-limit", Usage: "keep only the newest `K` checkpoints (0: all); older ones go only after a newer one is complete"},
			&cli.StringFlag{Name: "resume", Value: "never", Usage: "never (start afresh; refused when <output-dir>/checkpoints holds tags), auto (continue from checkpoints/latest, or the newest tag that verifies; afresh when there is none: what a requeued job passes), or a checkpoints or global_step `DIR`"},
			&cli.BoolFlag{Name: "overwrite", Usage: "start afresh in an output directory that holds checkpoints: they are moved aside to checkpoints.old-<time>, not deleted"},
			&cli.BoolFlag{Name: "allow-config-change", Usage: "resume although the learning rate, schedule, batch sizes, precision or model differ from the checkpoint's (the differences are listed either way)"},
			&cli.StringFlag{Name: "metrics-addr", Value: metrics.DefaultMetricsAddr, Usage: "Prometheus endpoint (/metrics, /healthz) `HOST:PORT`; each local rank adds its LOCAL_RANK to the port; 0.0.0.0:PORT to be scraped from elsewhere; off to disable"},
			&cli.DurationFlag{Name: "comm-timeout", Value: comm.DefaultTimeout, Usage: "deadline of every collective and of the rendezvous (a hung peer fails the run after this)"},
		}, loraFlags(true)...),
		Action: runTrain,
	}
}

func runTrain(c *cli.Context) error {
	rk, distributed, err := launch.DetectRank(os.Getenv)
	if err != nil {
		return err
	}
	if !distributed {
		rk = launch.Rank{WorldSize: 1, LocalWorldSize: 1}
	}
	out := c.App.Writer
	if rk.Rank != 0 {
		out = io.Discard // rank 0 speaks for the job; errors still reach stderr
	}
	device, autoNote, err := resolveDevice(c.String("device"), rk.WorldSize)
	if err != nil {
		return err
	}
	stages, err := readStages(c)
	if err != nil {
		return err
	}
	// Inputs are checked before anything is allocated: the model (sized by
	// the data's tokenizer), then the config it is trained with.
	mcfg, err := trainModel(c, stages)
	if err != nil {
		return err
	}
	cfg, batch, err := trainConfig(c, rk, mcfg)
	if err != nil {
		return err
	}
	seqLen := c.Int("seq-len")
	if stages != nil {
		if stages, err = resolveStages(c, stages, rk, batch, mcfg); err != nil {
			return err
		}
		seqLen = stages[0].SeqLen
	}
	if autoNote != "" && rk.Rank == 0 {
		fmt.Fprintf(c.App.ErrWriter, "info: --device auto chose the CPU: %s\n", autoNote)
	}
	dev, err := openTrainDevice(c, device, rk, mcfg, cfg.ZeRO.Stage, gemmShapes(mcfg, batch.MicroBatch, seqLen))
	if err != nil {
		return err
	}
	defer dev.close()
	maxT := seqLen
	for _, s := range stages {
		maxT = max(maxT, s.SeqLen)
	}
	est, err := memoryPreflight(c, rk, dev, cfg, mcfg, maxT)
	if err != nil {
		return err
	}
	prom, err := startMetrics(c, rk)
	if err != nil {
		return err
	}
	peak := dev.announce(c, out, rk, cfg)
	fmt.Fprintf(out, "model %s (%s): %s parameters | micro-batch %d × seq %d × grad-accum %d × ranks %d = %d tokens/step\n",
		modelName(c), mcfg.Summary(), groupDigits(int64(mcfg.NumParams())), batch.MicroBatch, seqLen, batch.GradAccum,
		rk.WorldSize, batch.TrainBatchSize*seqLen)
	lora, err := announceLoRA(out, c, mcfg)
	if err != nil {
		return err
	}

	topts := trainOptions(c, cfg, batch, mcfg, peak, out)
	topts.LoRA = lora
	topts.Observer = prom
	if vocab, ok, _ := syntheticData(topts.Data); ok {
		if topts.Batches, err = syntheticBatches(topts.Seed, rk.Rank, mcfg, vocab); err != nil {
			return err
		}
		topts.Data = nil
	}
	if rk.WorldSize > 1 {
		// Every rank must be running the same job: the rendezvous compares
		// these fields and names the ones that differ.
		jo := topts
		if stages != nil {
			jo = trainer.StageOptions(topts, stages, 0)
		}
		fields, err := jobFields(jo, dev.be)
		if err != nil {
			return err
		}
		cm, err := connect(c.Context, rk, dev.be, dev.gpu, c.Duration("comm-timeout"), fields, c.App.ErrWriter)
		if err != nil {
			return interruptedExit(c.Context, "during the rendezvous", err)
		}
		defer cm.Close()
		topts.Comm = cm
	}
	if rk.Rank == 0 && stages == nil {
		topts.Ready = func(local backend.MemoryStats) error { return memoryTable(out, local, topts, rk.WorldSize, est) }
	}
	res, err := runTraining(c.Context, dev.be, topts, stages)
	if err != nil {
		return stoppedExit(err)
	}
	if rk.Rank != 0 {
		return nil
	}
	_, synthetic, _ := syntheticData(c.StringSlice("data"))
	// A snapshot's own tokenizer.json, copied at start-up, says what the
	// ids mean; otherwise the data's tokenizer record goes beside the weights.
	if _, err := os.Stat(filepath.Join(topts.Snapshot, data.TokenizerInfoFile)); res.WeightsPath != "" && !synthetic && (topts.Snapshot == "" || err != nil) {
		if err := copyTokenizerInfo(trainData(c, stages), c.String("output-dir")); err != nil {
			return err
		}
	}
	printSummary(out, res, topts.MaxSteps)
	return nil
}

// trainModel is the model to train: --model's shape (a preset, a
// snapshot directory or a config.json), or --init-from's when --model is
// not given; a new preset model's vocabulary sized by the data's
// tokenizer; validated.
func trainModel(c *cli.Context, stages []trainer.Stage) (model.Config, error) {
	name := c.String("model")
	mcfg, err := model.ByName(name)
	if err != nil {
		return mcfg, fmt.Errorf("--model: %w", err)
	}
	if init := c.String("init-from"); init != "" {
		// The weights say what they are; --model, when given, must agree,
		// and is otherwise only the fallback for a GPT-2 file without
		// config.json beside it.
		src, err := model.OpenInitFrom(init, &mcfg)
		if err != nil {
			return mcfg, fmt.Errorf("--init-from: %w", err)
		}
		have := src.Config()
		src.Close()
		if c.IsSet("model") && have != mcfg {
			return mcfg, fmt.Errorf("--init-from %s holds %v, but --model %s is %v (%s); drop --model to train the snapshot's model",
				init, have, name, mcfg, strings.Join(have.Diff(mcfg), ", "))
		}
		mcfg, name = have, init
	}
	vocab, synthetic, err := syntheticData(c.StringSlice("data"))
	if err != nil {
		return mcfg, err
	}
	if synthetic {
		if c.IsSet("num-train-epochs") {
			return mcfg, fmt.Errorf("--data synthetic has no epochs; pass --max-steps")
		}
		if mcfg, err = syntheticModel(mcfg, name, vocab); err != nil {
			return mcfg, err
		}
	}
	var tokInfo *data.TokenizerInfo
	if !synthetic {
		tokInfo, err = dataTokenizer(trainData(c, stages), c.StringSlice("val-data"))
	} else if len(c.StringSlice("val-data")) > 0 {
		tokInfo, err = tokenizerBeside("--val-data", c.StringSlice("val-data"))
	}
	if err != nil {
		return mcfg, err
	}
	if c.String("init-from") == "" {
		if mcfg, err = vocabFromData(mcfg, name, tokInfo); err != nil {
			return mcfg, err
		}
	} else if tokInfo != nil && tokInfo.VocabSize > mcfg.V {
		return mcfg, fmt.Errorf("--init-from %s has vocab_size %d but the data's tokenizer %s has %d ids; prepare the data with the model's own tokenizer (gotrain data prepare --tokenizer %s)",
			c.String("init-from"), mcfg.V, tokInfo.Tokenizer, tokInfo.VocabSize, weightsDir(c.String("init-from")))
	}
	if err := mcfg.Validate(); err != nil {
		return mcfg, fmt.Errorf("--model %s: %w", name, err)
	}
	// With --stages each stage's seq_len is checked the same way, naming
	// the stage (trainer.ResolveStages).
	if len(stages) == 0 {
		if err := mcfg.CheckSeqLen(c.Int("seq-len")); err != nil {
			return mcfg, fmt.Errorf("--seq-len: %w", err)
		}
	}
	return mcfg, nil
}

// modelName names the run's model as the command line did: --init-from's
// path when the model comes from there, else --model.
func modelName(c *cli.Context) string {
	if c.String("init-from") != "" && !c.IsSet("model") {
		return c.String("init-from")
	}
	return c.String("model")
}

// snapshotDir is the Hugging Face snapshot the run's model comes from, whose
// tokenizer and generation files travel with the trained weights:
// --init-from's directory, else --model's when it names one ("" for a
// preset).
func snapshotDir(c *cli.Context) string {
	if init := c.String("init-from"); init != "" {
		return weightsDir(init)
	}
	if _, preset := model.Preset(c.String("model")); preset {
		return ""
	}
	return weightsDir(c.String("model"))
}

// trainConfig loads the DeepSpeed config with the flags that fill its
// "auto" values, prints its warnings on rank 0 and resolves the batch sizes.
func trainConfig(c *cli.Context, rk launch.Rank, mcfg model.Config) (*config.Config, config.Batch, error) {
	ov := config.Overrides{WorldSize: rk.WorldSize, Hidden: mcfg.C}
	if err := autoOverrides(c, &ov); err != nil {
		return nil, config.Batch{}, err
	}
	cfg, err := loadTrainConfig(c.String("config"), config.Options{Strict: !c.Bool("allow-unknown-keys"), Overrides: ov})
	if cfg != nil && rk.Rank == 0 {
		for _, w := range cfg.Warnings {
			fmt.Fprintln(c.App.ErrWriter, w)
		}
	}
	if err != nil {
		return nil, config.Batch{}, err
	}
	batch, err := cfg.Resolve(rk.WorldSize)
	if err != nil || (!c.IsSet("num-train-epochs") && !c.IsSet("stages")) {
		return cfg, batch, err
	}
	// Epochs (or a curriculum's stages) fix the step count from the data,
	// which needs the resolved batch; "auto" total_num_steps is then
	// filled with it.
	var steps int
	if c.IsSet("stages") {
		steps, err = stagesSteps(c, rk, batch, mcfg)
	} else {
		steps, err = epochSteps(c, rk, batch, mcfg)
	}
	if err != nil {
		return nil, config.Batch{}, err
	}
	if err := c.Set("max-steps", strconv.Itoa(steps)); err != nil {
		return nil, config.Batch{}, err
	}
	ov.TotalSteps = config.Some(steps)
	if cfg, err = loadTrainConfig(c.String("config"), config.Options{Strict: !c.Bool("allow-unknown-keys"), Overrides: ov}); err != nil {
		return nil, config.Batch{}, err
	}
	batch, err = cfg.Resolve(rk.WorldSize)
	return cfg, batch, err
}

// trainOptions are the trainer's options from the flags.
func trainOptions(c *cli.Context, cfg *config.Config, batch config.Batch, mcfg model.Config, peak float64, out io.Writer) trainer.Options {
	return trainer.Options{
		Config: cfg, Batch: batch, Model: mcfg,
		InitFrom: c.String("init-from"), Snapshot: snapshotDir(c), Seed: c.Uint64("seed"),
		Data: c.StringSlice("data"), ValData: c.StringSlice("val-data"),
		SeqLen: c.Int("seq-len"), MaxSteps: c.Int("max-steps"),
		EvalEvery: c.Int("eval-every"), EvalBatches: c.Int("eval-batches"), EvalBatchSize: c.Int("eval-batch-size"), Shuffle: c.Bool("shuffle"), Pack: c.Bool("pack"),
		Checkpoint:     c.Bool("gradient-checkpointing") || cfg.ActivationCheckpointing.Present,
		CheckpointHost: cfg.ActivationCheckpointing.CPUCheckpointing,
		OutputDir:      c.String("output-dir"), PeakFLOPS: peak, Log: out, PrintEvery: c.Int("log-every"),
		SaveEvery: c.Int("save-every"), SaveTotalLimit: c.Int("save-total-limit"), Resume: c.String("resume"),
		Overwrite: c.Bool("overwrite"), AllowConfigChange: c.Bool("allow-config-change"),
		ConfigText: configText(c.String("config")), Version: Version,
	}
}

// memoryTable prints what this rank holds after start-up beside what
// gotrain estimate predicts for the same run: the same code, so the same
// numbers. est is the memory check's estimate of this run when it made one
// (the same options), so the run is not estimated twice.
func memoryTable(out io.Writer, local backend.MemoryStats, o trainer.Options, world int, est *trainer.MemoryEstimate) error {
	var err error
	if est == nil {
		eo := trainer.EstimateOptions{Checkpoint: o.Checkpoint}
		if o.LoRA != nil {
			eo.LoRA, eo.LoRAFP32 = &o.LoRA.Config, o.LoRA.FP32
		}
		var e trainer.MemoryEstimate
		if e, err = trainer.Estimate(o.Config, o.Model, world, o.SeqLen, eo); err == nil {
			est = &e
		}
	}
	if err == nil {
		err = formatMeasured(out, local, *est)
	}
	if err != nil {
		return fmt.Errorf("memory table: %w", err)
	}
	return nil
}

// trainDevice is the backend a rank trains on: the GPU (gpu set) or the
// CPU with its BLAS.
type trainDevice struct {
	be      backend.Backend
	gpu     *gpuRank
	gemm    cpuGEMM
	threads int
}

// openTrainDevice opens the rank's device, ranks sharing a machine sharing
// its cores, and refuses a model whose parameters cannot fit. On the CPU
// the GEMM is chosen on shapes, the run's largest.
func openTrainDevice(c *cli.Context, device string, rk launch.Rank, mcfg model.Config, stage int, shapes []blas.Shape) (*trainDevice, error) {
	d := &trainDevice{threads: c.Int("threads")}
	if d.threads <= 0 {
		d.threads = max(1, runtime.NumCPU()/max(1, rk.LocalWorldSize))
		if os.Getenv(launch.BoundCoresEnv) != "" {
			d.threads = runtime.NumCPU() // bound to its own share already (--bind_cores_to_rank)
		}
	}
	host, hostKnown := hostMemTotal()
	var err error
	if device == "cuda" {
		if d.gpu, err = openGPU(rk.LocalRank, d.threads, c.Bool("allow-tf32")); err != nil {
			return nil, err
		}
		d.be = d.gpu.be
		if hostKnown {
			if err := checkModelFits(mcfg, c.String("model"), stage, rk, host, d.gpu.dev.Info().TotalMemoryBytes); err != nil {
				d.close()
				return nil, err
			}
		}
		return d, nil
	}
	// A model that cannot fit is refused before the GEMMs are timed on its
	// shapes.
	if hostKnown {
		if err := checkModelFits(mcfg, c.String("model"), stage, rk, host, 0); err != nil {
			return nil, err
		}
	}
	if d.be, d.gemm, err = newBackend(d.threads, shapes); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *trainDevice) close() {
	if d.gpu != nil {
		d.gpu.Close()
	}
}

// announce prints the start-up line and returns one rank's peak FLOP/s for
// MFU: --peak-flops, the GPU's known dense bf16 peak, or on the CPU the
// machine's sgemm roofline (the best of both GEMMs, measured when the GEMM
// was chosen or cached from an earlier run).
func (d *trainDevice) announce(c *cli.Context, out io.Writer, rk launch.Rank, cfg *config.Config) float64 {
	peak := c.Float64("peak-flops")
	stage, prec := cfg.ZeRO.Stage, precisionLabel(cfg)
	if d.gpu == nil {
		if peak == 0 {
			peak = d.gemm.roofline
		}
		fmt.Fprintf(out, "gotrain %s | %d rank(s), ZeRO stage %d, precision %s | device %s | BLAS %s, %d threads/rank | sgemm roofline %.1f GFLOP/s per rank\n",
			Version, rk.WorldSize, stage, prec, d.be.Name(), d.gemm.describe(), d.threads, peak/1e9)
		return peak
	}
	gi := d.gpu.dev.Info()
	if w := autoFP32Warning(cfg, gi.SM()); w != "" && rk.Rank == 0 {
		fmt.Fprintln(c.App.ErrWriter, w)
	}
	if peak == 0 {
		if g, ok := costmodel.DeviceGPU(gi.Name); ok {
			peak = g.BF16
		} else if rk.Rank == 0 {
			fmt.Fprintf(c.App.ErrWriter, "info: no peak FLOP/s known for %q; pass --peak-flops to report MFU\n", gi.Name)
		}
	}
	fmt.Fprintf(out, "gotrain %s | %d rank(s), ZeRO stage %d, precision %s | device %s: %s (sm_%d, %.0f GiB) | kernels %s %s | peak %.0f TFLOP/s\n",
		Version, rk.WorldSize, stage, prec, d.be.Name(), gi.Name, gi.SM(), float64(gi.TotalMemoryBytes)/(1<<30),
		d.gpu.be.Kernels().Image().Kind, d.gpu.be.Kernels().Image().Arch, peak/1e12)
	return peak
}

// loadTrainConfig reads --config, or the embedded default when it is empty.
func loadTrainConfig(path string, opts config.Options) (*config.Config, error) {
	if path != "" {
		return config.Load(path, opts)
	}
	b, err := fs.ReadFile(configs.Files, configs.Default)
	if err != nil {
		return nil, err
	}
	return config.Parse("(embedded) "+configs.Default, b, opts)
}

// configText is the config file's text for checkpoints ("" for the embedded default).
func configText(path string) string {
	if path == "" {
		return ""
	}
	b, err := config.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// startMetrics serves this rank's Prometheus endpoint. A busy port or any
// other listening problem is a warning: metrics never fail a run.
func startMetrics(c *cli.Context, rk launch.Rank) (trainer.Observer, error) {
	addr, err := metrics.MetricsAddr(c.String("metrics-addr"), rk.LocalRank)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	if addr == "" {
		return nil, nil
	}
	var popts metrics.PromOptions
	// GPU metrics come from NVML when a driver answers; otherwise they are
	// not registered and rank 0 says why once.
	if _, nerr := metrics.QueryDefaultNVML(""); nerr == nil {
		popts.GPUs = func() ([]metrics.GPUInfo, error) {
			rep, err := metrics.QueryDefaultNVML("")
			return rep.GPUs, err
		}
	} else if rk.Rank == 0 {
		fmt.Fprintf(c.App.ErrWriter, "info: no GPU metrics: %v\n", nerr)
	}
	p, err := metrics.NewPrometheus(rk.Rank, popts)
	if err != nil {
		return nil, err
	}
	bound, err := p.Serve(c.Context, addr)
	if err != nil {
		fmt.Fprintf(c.App.ErrWriter, "warning: rank %d: metrics endpoint not started: %v (training goes on; pass --metrics-addr to choose another port)\n", rk.Rank, err)
		return p, nil
	}
	if rk.Rank == 0 {
		fmt.Fprintf(c.App.Writer, "metrics: http://%s/metrics (rank 0; local rank r serves port + r)\n", bound)
	}
	return p, nil
}

// connect joins the job's rendezvous (rank 0 serves it at MASTER_ADDR:PORT)
// and opens the collectives between the ranks: NCCL between GPUs (gpu is
// not nil), TCP between CPU ranks. Every rank proves the job secret
// (jobauth.go) and brings fields, which must equal rank 0's: a rank started
// with another config, data or command line is refused before step 1.
func connect(ctx context.Context, rk launch.Rank, be backend.Backend, gpu *gpuRank, timeout time.Duration, fields []trainer.Field, errw io.Writer) (comm.Comm, error) {
	cf := make([]comm.Field, len(fields))
	for i, f := range fields {
		cf[i] = comm.Field{Name: f.Name, Value: f.Value}
	}
	// A MASTER_ADDR no resolver knows fails now, not after the rendezvous
	// has retried it for the whole --comm-timeout.
	if err := launch.CheckMasterAddr(ctx, net.DefaultResolver, rk.MasterAddr); err != nil {
		return nil, err
	}
	auth, err := resolveJobAuth(os.Getenv, rk, cf)
	if err != nil {
		return nil, err
	}
	for _, w := range auth.warnings {
		fmt.Fprintln(errw, w)
	}
	if rk.Rank == 0 {
		fmt.Fprintln(errw, auth.describe())
	}
	st, err := comm.Rendezvous(ctx, comm.RendezvousOptions{Rank: rk.Rank, Size: rk.WorldSize,
		Addr: rk.MasterAddr, Port: rk.MasterPort, Timeout: timeout,
		Secret: auth.secret, JobID: auth.jobID, SecretHint: auth.hint, Fields: cf,
		Warnf: func(format string, args ...any) { fmt.Fprintf(errw, format+"\n", args...) }})
	if err != nil {
		return nil, err
	}
	var c comm.Comm
	if gpu != nil {
		c, err = connectNCCL(ctx, rk, st, gpu, timeout)
	} else {
		c, err = tcp.New(ctx, st, be, tcp.Options{Rank: rk.Rank, Size: rk.WorldSize, Timeout: timeout})
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	return &storeComm{Comm: c, store: st}, nil
}

// storeComm closes the rendezvous store with the Comm.
type storeComm struct {
	comm.Comm
	store comm.Store
}

func (s *storeComm) Close() error {
	err := s.Comm.Close()
	if serr := s.store.Close(); err == nil {
		err = serr
	}
	return err
}

// newBackend is the CPU backend with the faster GEMM of this machine on
// shapes (nil: the 1024³ product), unless $GOTRAIN_BLAS forces one.
func newBackend(threads int, shapes []blas.Shape) (backend.Backend, cpuGEMM, error) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	g, err := chooseCPUGEMM("", threads, shapes)
	if err != nil {
		return nil, g, err
	}
	return cpu.New(cpu.Options{Gemm: g.impl, Threads: threads}), g, nil
}

// vocabFromData sizes a new model's vocabulary to the tokenizer recorded with
// the training shards (tokenizer.json, written by gotrain data prepare and
// validated by dataTokenizer): the presets give GPT-2's 50257 ids, but a
// model trained on byte-level data needs only 257. A tokenizer larger than a
// config.json's vocabulary is an error; shards without tokenizer.json (info
// nil) keep the model's vocabulary.
func vocabFromData(cfg model.Config, name string, info *data.TokenizerInfo) (model.Config, error) {
	if info == nil || info.VocabSize == cfg.V {
		return cfg, nil
	}
	// The GPT-2 presets are shapes to size; a config.json and the Llama
	// family's presets keep their vocabulary, so the trained weights load
	// into the model class they name.
	if _, preset := model.Preset(name); preset && cfg.Arch == model.ArchGPT2 {
		cfg.V, cfg.Vp = info.VocabSize, model.PadVocab(info.VocabSize)
		return cfg, nil
	}
	if info.VocabSize > cfg.V {
		return cfg, fmt.Errorf("--model %s has vocab_size %d but the data's tokenizer %s has %d ids; use a model with vocab_size ≥ %d, or prepare the data with the model's own tokenizer",
			name, cfg.V, info.Tokenizer, info.VocabSize, info.VocabSize)
	}
	return cfg, nil
}

// copyTokenizerInfo records the data's tokenizer next to the weights so
// `gotrain sample` decodes with the tokenizer the model was trained on.
func copyTokenizerInfo(dataPatterns []string, outDir string) error {
	shards, err := data.ResolveShards(dataPatterns)
	if err != nil || len(shards) == 0 {
		return err
	}
	info, err := data.ReadTokenizerInfo(filepath.Dir(shards[0]))
	if err != nil {
		return nil // shards made elsewhere (llm.c) carry no tokenizer.json; sample falls back to --tokenizer
	}
	tok, err := info.Open()
	if err != nil {
		return err
	}
	return data.WriteTokenizerInfo(outDir, tok)
}
