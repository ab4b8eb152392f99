package optim

import (
	"fmt"
	"math"
)

// WarmupCosineLRParams mirror DeepSpeed's WarmupCosineLR params.
type WarmupCosineLRParams struct {
	TotalNumSteps  int     // total_num_steps T, required, > W
	WarmupMinRatio float64 // warmup_min_ratio, e.g. 0
	WarmupNumSteps int     // warmup_num_steps W; values below 2 act as 2
	CosMinRatio    float64 // cos_min_ratio, e.g. 0.0001
	WarmupType     string  // warmup_type: "log" (also "") or "linear"
}

// WarmupCosineLR scales the optimizer's lr by a ratio r(t):
//
//	t < W:  r = wmin + (1−wmin)·γ(t)                    (γ as WarmupLR's)
//	t ≥ W:  r = max(0, cmin + (1−cmin)·(1+cos(π·s/S))/2),  s = t−W+1, S = T−W
//
// and 0 before the first Step. Past t = T−1 (s > S) the cosine rises again,
// as in the DeepSpeed release these semantics follow; later releases clamp
// s/S at 1.
type WarmupCosineLR struct {
	iteration
	total       int
	minRatio    float64
	cosMinRatio float64
	curve       warmupCurve
	cosineSteps float64 // S = T−W
}

// NewWarmupCosineLR returns a WarmupCosineLR at last_batch_iteration -1.
// DeepSpeed only warns when T < W and divides by zero when T = W; both leave
// no cosine phase, so here T must exceed W.
func NewWarmupCosineLR(p WarmupCosineLRParams) (*WarmupCosineLR, error) {
	c, err := newWarmupCurve(p.WarmupNumSteps, p.WarmupType)
	if err != nil {
		return nil, fmt.Errorf("scheduler WarmupCosineLR: %w", err)
	}
	if p.TotalNumSteps <= c.steps {
		return nil, fmt.Errorf("scheduler WarmupCosineLR: total_num_steps %d must exceed warmup_num_steps %d: set total_num_steps to the run's optimizer steps or shorten the warmup",
			p.TotalNumSteps, c.steps)
	}
	return &WarmupCosineLR{iteration: newIteration(), total: p.TotalNumSteps, minRatio: p.WarmupMinRatio,
		cosMinRatio: p.CosMinRatio, curve: c, cosineSteps: float64(p.TotalNumSteps - c.steps)}, nil
}

// LR returns base·r(t).
func (s *WarmupCosineLR) LR(base float64) float64 { return base * s.ratio() }

func (s *WarmupCosineLR) ratio() float64 {
	switch {
	case s.t < 0:
		return 0
	case s.t < s.curve.steps:
		return s.minRatio + (1-s.minRatio)*s.curve.gamma(s.t)
	}
	progress := float64(s.t-s.curve.steps+1) / s.cosineSteps
	return math.Max(0, s.cosMinRatio+(1-s.cosMinRatio)*(1+math.Cos(math.Pi*progress))/2)
}

// Momentum reports that the optimizer's betas apply.
func (s *WarmupCosineLR) Momentum() (beta1, beta2 float64, ok bool) { return 0, 0, false }
