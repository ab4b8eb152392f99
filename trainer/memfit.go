package trainer

import (
	"fmt"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/model"
)

// The check before step 1: will the run's predicted peak (Estimate, the
// trainer's own start-up and steps on an accounting backend) fit the memory
// that is free now? If not, which of the usual remedies would make it fit,
// each predicted by estimating the run again with that one change.

// FreeMemory is the memory a rank may use, in bytes; 0 means unknown (not
// checked).
type FreeMemory struct {
	// GPU is set on a GPU run: Device is then the rank's GPU's free memory
	// (cuMemGetInfo or NVML). On a CPU run the CPU backend's device pool
	// is host memory, so both pools count against Host.
	GPU    bool
	Device int64
	// Host is the machine's free host memory (MemAvailable), shared by
	// HostRanks ranks (0: 1).
	Host      int64
	HostRanks int
}

// MemoryNeed is what a run needs of each kind of memory against what is
// free: Device per GPU, Host for all of a machine's ranks.
type MemoryNeed struct {
	Device, Host         int64
	FreeDevice, FreeHost int64
}

// Short is how many bytes are missing on the device and in host memory
// (0 where it fits or nothing is known).
func (n MemoryNeed) Short() (device, host int64) {
	if n.FreeDevice > 0 && n.Device > n.FreeDevice {
		device = n.Device - n.FreeDevice
	}
	if n.FreeHost > 0 && n.Host > n.FreeHost {
		host = n.Host - n.FreeHost
	}
	return device, host
}

// Fits reports whether nothing is short.
func (n MemoryNeed) Fits() bool {
	d, h := n.Short()
	return d == 0 && h == 0
}

// needOf is what est's peak asks of free.
func needOf(est MemoryEstimate, free FreeMemory) MemoryNeed {
	peak := est.Peak.Total()
	ranks := int64(max(1, free.HostRanks))
	n := MemoryNeed{FreeDevice: free.Device, FreeHost: free.Host}
	if free.GPU {
		n.Device, n.Host = peak.Device, peak.Host*ranks
	} else {
		n.FreeDevice = 0
		n.Host = (peak.Device + peak.Host) * ranks
	}
	return n
}

// MemoryFix is one remedy for a run that does not fit: the change, how to
// ask for it, and the run's predicted peak with it.
type MemoryFix struct {
	Name string // e.g. "activation checkpointing"
	How  string // the flag or DeepSpeed key that asks for it
	Peak PoolBytes
	Need MemoryNeed
	Err  error // the changed run could not be estimated (Peak is then zero)
}

// MemoryCheck is CheckMemory's answer.
type MemoryCheck struct {
	Estimate MemoryEstimate
	Need     MemoryNeed
	// Fixes is empty when the run fits; otherwise the remedies in the
	// order to try them, cheapest in throughput first: activation
	// checkpointing, ZeRO-3, optimizer offload, then parameter offload,
	// half the micro batch with twice the accumulation, a shorter
	// sequence. Remedies already in use are left out.
	Fixes []MemoryFix
}

// CheckMemory estimates the run (see Estimate) and compares its peak with
// free. When it does not fit it estimates each remedy too.
func CheckMemory(cfg *config.Config, m model.Config, world, seqLen int, opts EstimateOptions, free FreeMemory) (MemoryCheck, error) {
	est, err := Estimate(cfg, m, world, seqLen, opts)
	if err != nil {
		return MemoryCheck{}, err
	}
	mc := MemoryCheck{Estimate: est, Need: needOf(est, free)}
	if mc.Need.Fits() {
		return mc, nil
	}
	for _, f := range memoryRemedies(cfg, est, seqLen, opts) {
		fix := MemoryFix{Name: f.name, How: f.how}
		e, err := Estimate(f.cfg, m, world, f.seqLen, f.opts)
		if err != nil {
			fix.Err = err
		} else {
			fix.Peak, fix.Need = e.Peak.Total(), needOf(e, free)
		}
		mc.Fixes = append(mc.Fixes, fix)
	}
	return mc, nil
}

// remedy is one changed run to estimate.
type remedy struct {
	name, how string
	cfg       *config.Config
	seqLen    int
	opts      EstimateOptions
}

// memoryRemedies lists the changes to try, each on its own from the run as
// configured (parameter offload brings the ZeRO-3 and optimizer offload it
// needs with it).
func memoryRemedies(cfg *config.Config, est MemoryEstimate, seqLen int, opts EstimateOptions) []remedy {
	var rs []remedy
	with := func(name, how string, change func(c *config.Config, o *EstimateOptions, t *int)) {
		c := *cfg
		o, t := opts, seqLen
		change(&c, &o, &t)
		rs = append(rs, remedy{name: name, how: how, cfg: &c, seqLen: t, opts: o})
	}
	cpuOpt := func(c *config.Config) {
		c.ZeRO.OffloadOptimizer = &config.OffloadOptimizer{Device: "cpu", PinMemory: true}
		setStage(c, max(c.ZeRO.Stage, 1)) // DeepSpeed ignores offload at stage 0
	}
	if !est.Checkpointing {
		with("activation checkpointing", `--gradient-checkpointing (or an "activation_checkpointing" block)`,
			func(_ *config.Config, o *EstimateOptions, _ *int) { o.Checkpoint = true })
	}
	if est.Stage < 3 {
		with("ZeRO-3", `"zero_optimization": {"stage": 3}`, func(c *config.Config, _ *EstimateOptions, _ *int) { setStage(c, 3) })
	}
	if !est.OffloadOptimizer {
		with("optimizer offload", `"offload_optimizer": {"device": "cpu", "pin_memory": true}`,
			func(c *config.Config, _ *EstimateOptions, _ *int) { cpuOpt(c) })
	}
	if !est.OffloadParam {
		with("parameter offload", `ZeRO-3 with "offload_optimizer" and "offload_param": {"device": "cpu", "pin_memory": true}`,
			func(c *config.Config, _ *EstimateOptions, _ *int) {
				cpuOpt(c)
				setStage(c, 3)
				c.ZeRO.OffloadParam = &config.OffloadParam{Device: "cpu", PinMemory: true}
			})
	}
	if b := est.MicroBatch; b >= 2 {
		gas := 1
		if r, err := cfg.Resolve(est.World); err == nil {
			gas = r.GradAccum
		}
		with("half the micro batch, twice the accumulation",
			fmt.Sprintf(`"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": %d (same global batch)`, b/2, 2*gas),
			func(c *config.Config, _ *EstimateOptions, _ *int) {
				c.TrainMicroBatchSizePerGPU = config.Some(b / 2)
				c.GradientAccumulationSteps = config.Some(2 * gas)
			})
	}
	if seqLen >= 2 {
		with("a shorter sequence", fmt.Sprintf("--seq-len %d", seqLen/2),
			func(_ *config.Config, _ *EstimateOptions, t *int) { *t = seqLen / 2 })
	}
	return rs
}

// setStage moves c to ZeRO stage s as a file saying so would: overlap_comm,
// when the file leaves it out, follows the stage as DeepSpeed resolves it.
func setStage(c *config.Config, s int) {
	c.ZeRO.Stage = s
	if src, ok := c.Source("zero_optimization.overlap_comm"); !ok || src.Kind == config.FromInferred {
		c.ZeRO.OverlapComm = s == 3
	}
}
