package trainer

import (
	"fmt"
	"strings"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/optim"
)

// checkSupported refuses settings this trainer does not run yet, naming the
// key and what to write instead. The config package has already warned about
// known-but-unsupported keys; these are the ones that would change the math.
func checkSupported(c *config.Config) error {
	var bad []string
	if !c.Optimizer.Supported {
		bad = append(bad, fmt.Sprintf("optimizer.type %q: gotrain trains with Adam/AdamW; set \"type\": \"AdamW\"", c.Optimizer.Written))
	}
	if c.Scheduler != nil && !c.Scheduler.Supported {
		bad = append(bad, fmt.Sprintf("scheduler.type %q: gotrain implements WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle and LRRangeTest", c.Scheduler.Type))
	}
	if o := c.ZeRO.OffloadOptimizer; o != nil && o.Device == "nvme" {
		bad = append(bad, `zero_optimization.offload_optimizer.device "nvme": NVMe offload is not supported yet; use "cpu"`)
	}
	if o := c.ZeRO.OffloadParam; o != nil && o.Device == "nvme" {
		bad = append(bad, `zero_optimization.offload_param.device "nvme": NVMe offload is not supported yet; use "cpu"`)
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: cannot train with this config:\n  %s", c.File, strings.Join(bad, "\n  "))
	}
	return nil
}

// adamWConfig maps the optimizer block onto optim's AdamW settings.
func adamWConfig(o config.Optimizer) (optim.AdamWConfig, error) {
	c := optim.AdamWConfig{LR: o.LR, Beta1: o.Betas[0], Beta2: o.Betas[1], Eps: o.Eps,
		WeightDecay: o.WeightDecay, AdamWMode: o.AdamWMode}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c, nil
}

// scheduler builds the scheduler block's schedule, or the Hugging Face one
// the run asked for; neither is a constant rate.
func scheduler(s *config.Scheduler) (optim.Scheduler, error) {
	if s == nil {
		return optim.NewConstant(), nil
	}
	p := s.Params
	var (
		sch optim.Scheduler
		err error
	)
	warm := optim.WarmupLRParams{WarmupMinLR: p.WarmupMinLR, WarmupMaxLR: p.WarmupMaxLR,
		WarmupNumSteps: p.WarmupNumSteps, WarmupType: p.WarmupType}
	switch {
	case s.HF:
		sch, err = optim.NewHFSchedule(s.Type, p.WarmupNumSteps, p.TotalNumSteps)
	case s.Type == "WarmupLR":
		sch, err = optim.NewWarmupLR(warm)
	case s.Type == "WarmupDecayLR":
		sch, err = optim.NewWarmupDecayLR(optim.WarmupDecayLRParams{WarmupLRParams: warm, TotalNumSteps: p.TotalNumSteps})
	case s.Type == "WarmupCosineLR":
		sch, err = optim.NewWarmupCosineLR(optim.WarmupCosineLRParams{TotalNumSteps: p.TotalNumSteps,
			WarmupMinRatio: p.WarmupMinRatio, WarmupNumSteps: p.WarmupNumSteps, CosMinRatio: p.CosMinRatio,
			WarmupType: p.WarmupType})
	case s.Type == "OneCycle":
		second, _ := p.CycleSecondStepSize.Get()
		sch, err = optim.NewOneCycle(optim.OneCycleParams{CycleMinLR: p.CycleMinLR, CycleMaxLR: p.CycleMaxLR,
			DecayLRRate: p.DecayLRRate, CycleFirstStepSize: p.CycleFirstStepSize, CycleSecondStepSize: second,
			DecayStepSize: p.DecayStepSize, CycleMomentum: p.CycleMomentum, CycleMinMom: p.CycleMinMom,
			CycleMaxMom: p.CycleMaxMom, DecayMomRate: p.DecayMomRate})
	case s.Type == "LRRangeTest":
		sch, err = optim.NewLRRangeTest(optim.LRRangeTestParams{MinLR: p.LRRangeTestMinLR,
			StepSize: p.LRRangeTestStepSize, StepRate: p.LRRangeTestStepRate, Staircase: p.LRRangeTestStaircase})
	default:
		return nil, fmt.Errorf("scheduler.type %q: not supported by gotrain", s.Type)
	}
	if err != nil {
		return nil, err // optim names the scheduler and the parameter
	}
	if p.LastBatchIteration != -1 {
		if err := sch.Restore(optim.SchedulerState{LastBatchIteration: p.LastBatchIteration}); err != nil {
			return nil, fmt.Errorf("scheduler.params.last_batch_iteration: %w", err)
		}
	}
	return sch, nil
}

// precision returns the parameter/activation dtype the config asks for and
// the dtype gradients accumulate and reduce in: fp32 unless
// data_types.grad_accum_dtype says otherwise (DeepSpeed's None means the
// model dtype, which for bf16 gotrain reads as fp32 — the accumulation
// DeepSpeed's own BF16_Optimizer and users asking for stability want).
func precision(c *config.Config) (param, grad backend.DType, err error) {
	param, grad = backend.F32, backend.F32
	switch {
	case c.BF16.Enabled:
		param = backend.BF16
	case c.FP16.Enabled:
		param = backend.F16
	}
	if v, ok := c.DataTypes.GradAccumDtype.Get(); ok {
		if grad, err = backend.ParseDType(v); err != nil {
			return 0, 0, fmt.Errorf("data_types.grad_accum_dtype: %w", err)
		}
	}
	return param, grad, nil
}

// lossScaler builds fp16's loss scaler from the fp16 block (nil without fp16:
// fp32 and bf16 train unscaled).
func lossScaler(c *config.Config, rank int, log func(string)) (*optim.LossScaler, error) {
	if !c.FP16.Enabled {
		return nil, nil
	}
	f := c.FP16
	s, err := optim.NewLossScaler(optim.LossScalerConfig{LossScale: f.LossScale, InitialScalePower: f.InitialScalePower,
		LossScaleWindow: f.LossScaleWindow, Hysteresis: f.Hysteresis, ConsecutiveHysteresis: f.ConsecutiveHysteresis,
		MinLossScale: f.MinLossScale}, rank, log)
	if err != nil {
		return nil, fmt.Errorf("fp16: %w", err)
	}
	return s, nil
}
