package optim

import (
	"fmt"
	"math"
)

// HFSchedule is one of Hugging Face transformers' schedules (get_scheduler
// in transformers/optimization.py), a torch LambdaLR: the optimizer's lr
// times a factor λ(n) of the optimizer steps n taken so far. With W warmup
// and T total steps:
//
//	n < W:            λ = n / max(1, W)          (every type but "constant")
//	linear:           λ = max(0, (T−n) / max(1, T−W))
//	cosine:           λ = max(0, (1 + cos(π·p)) / 2),  p = (n−W) / max(1, T−W)
//	constant_with_warmup, constant:  λ = 1
//
// Timing differs from DeepSpeed's schedulers: a LambdaLR is created at
// n = 0 and applies λ(0) to the first step, so optimizer step k runs with
// λ(k−1) (with a warmup, the first step's rate is 0, as under the Trainer).
// In this package's last_batch_iteration terms (t = k − 2 at step k) that is
// λ(t+1), so checkpoints count steps as every other scheduler's do.
type HFSchedule struct {
	iteration
	name          string
	warmup, total int
}

// NewHFSchedule returns the schedule transformers' get_scheduler(name,
// num_warmup_steps=warmup, num_training_steps=total) builds, at
// last_batch_iteration -1. "constant" ignores warmup, as get_scheduler does.
func NewHFSchedule(name string, warmup, total int) (*HFSchedule, error) {
	switch name {
	case "linear", "cosine", "constant_with_warmup", "constant":
	default:
		return nil, fmt.Errorf("lr_scheduler_type %q: gotrain implements linear, cosine, constant_with_warmup and constant", name)
	}
	if warmup < 0 || total < 0 {
		return nil, fmt.Errorf("lr_scheduler_type %s: warmup %d and total %d steps must not be negative", name, warmup, total)
	}
	if name == "constant" {
		warmup = 0
	}
	return &HFSchedule{iteration: newIteration(), name: name, warmup: warmup, total: total}, nil
}

// LR returns base·λ(t+1).
func (s *HFSchedule) LR(base float64) float64 { return base * s.lambda(s.t+1) }

// lambda is the LambdaLR factor after n optimizer steps.
func (s *HFSchedule) lambda(n int) float64 {
	if n < s.warmup {
		return float64(n) / float64(max(1, s.warmup))
	}
	decay := float64(max(1, s.total-s.warmup))
	switch s.name {
	case "linear":
		return math.Max(0, float64(s.total-n)/decay)
	case "cosine":
		// num_cycles 0.5: half a cosine from 1 down to 0 at n = T.
		return math.Max(0, 0.5*(1+math.Cos(math.Pi*2*0.5*float64(n-s.warmup)/decay)))
	}
	return 1
}

// Momentum reports that the optimizer's betas apply.
func (s *HFSchedule) Momentum() (beta1, beta2 float64, ok bool) { return 0, 0, false }
