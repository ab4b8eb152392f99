package optim

import (
	"fmt"
	"math"
)

// Warmup curve names (DeepSpeed's warmup_type).
const (
	WarmupLog    = "log"
	WarmupLinear = "linear"
)

// warmupCurve is DeepSpeed's γ(t) for 0 ≤ t < W, shared by WarmupLR,
// WarmupDecayLR and WarmupCosineLR.
type warmupCurve struct {
	steps  int // W = max(2, warmup_num_steps): log(W) must not be 0
	linear bool
}

// newWarmupCurve checks warmup_type. DeepSpeed warns about an unknown type
// and silently uses "log"; a typo there changes the whole schedule, so it is
// an error here. The empty string means the default, "log".
func newWarmupCurve(numSteps int, warmupType string) (warmupCurve, error) {
	c := warmupCurve{steps: max(2, numSteps)}
	switch warmupType {
	case WarmupLog, "":
	case WarmupLinear:
		c.linear = true
	default:
		return c, fmt.Errorf("warmup_type %q is not %q or %q (DeepSpeed would warn and use %q)",
			warmupType, WarmupLog, WarmupLinear, WarmupLog)
	}
	return c, nil
}

// gamma is log(t+1)/log(W) or t/W; callers use it only for 0 ≤ t < W.
func (c warmupCurve) gamma(t int) float64 {
	if c.linear {
		return float64(t) / float64(c.steps)
	}
	return math.Log(float64(t+1)) / math.Log(float64(c.steps))
}

// WarmupLRParams mirror DeepSpeed's WarmupLR params.
type WarmupLRParams struct {
	WarmupMinLR    float64 // warmup_min_lr, e.g. 0
	WarmupMaxLR    float64 // warmup_max_lr, e.g. 0.001
	WarmupNumSteps int     // warmup_num_steps W; values below 2 act as 2
	WarmupType     string  // warmup_type: "log" (also "") or "linear"
}

// WarmupLR rises from warmup_min_lr to warmup_max_lr over W steps and stays:
//
//	lr(t) = min + (max−min)·γ(t),  γ = log(t+1)/log(W) or t/W for t < W, else 1
//
// and warmup_min_lr before the first Step.
type WarmupLR struct {
	iteration
	minLR, maxLR float64
	curve        warmupCurve
}

// NewWarmupLR returns a WarmupLR at last_batch_iteration -1.
func NewWarmupLR(p WarmupLRParams) (*WarmupLR, error) {
	c, err := newWarmupCurve(p.WarmupNumSteps, p.WarmupType)
	if err != nil {
		return nil, fmt.Errorf("scheduler WarmupLR: %w", err)
	}
	return &WarmupLR{iteration: newIteration(), minLR: p.WarmupMinLR, maxLR: p.WarmupMaxLR, curve: c}, nil
}

// LR ignores base: WarmupLR sets absolute rates.
func (s *WarmupLR) LR(base float64) float64 {
	if s.t < 0 {
		return s.minLR
	}
	g := 1.0
	if s.t < s.curve.steps {
		g = s.curve.gamma(s.t)
	}
	return s.minLR + (s.maxLR-s.minLR)*g
}

// Momentum reports that the optimizer's betas apply.
func (s *WarmupLR) Momentum() (beta1, beta2 float64, ok bool) { return 0, 0, false }

// WarmupDecayLRParams are WarmupLR's plus the required total_num_steps.
type WarmupDecayLRParams struct {
	WarmupLRParams
	TotalNumSteps int // total_num_steps T, required, ≥ 1
}

// WarmupDecayLR warms up like WarmupLR, then decays linearly to 0 at t = T:
//
//	γ(t) = max(0, (T−t) / max(1, T−W))  for t ≥ W
//
// T < W is allowed as in DeepSpeed (which only warns): lr drops to
// warmup_min_lr right after the warmup.
type WarmupDecayLR struct {
	WarmupLR
	total int
}

// NewWarmupDecayLR returns a WarmupDecayLR at last_batch_iteration -1.
func NewWarmupDecayLR(p WarmupDecayLRParams) (*WarmupDecayLR, error) {
	if p.TotalNumSteps < 1 {
		return nil, fmt.Errorf("scheduler WarmupDecayLR: total_num_steps is %d, want the number of optimizer steps of the run (≥ 1)", p.TotalNumSteps)
	}
	w, err := NewWarmupLR(p.WarmupLRParams)
	if err != nil {
		return nil, fmt.Errorf("scheduler WarmupDecayLR: %w", err)
	}
	return &WarmupDecayLR{WarmupLR: *w, total: p.TotalNumSteps}, nil
}

// LR ignores base: WarmupDecayLR sets absolute rates.
func (s *WarmupDecayLR) LR(base float64) float64 {
	if s.t < s.curve.steps {
		return s.WarmupLR.LR(base)
	}
	g := math.Max(0, float64(s.total-s.t)/math.Max(1, float64(s.total-s.curve.steps)))
	return s.minLR + (s.maxLR-s.minLR)*g
}
