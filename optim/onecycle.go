package optim

import (
	"fmt"
	"math"
)

// OneCycleParams mirror DeepSpeed's OneCycle params. DeepSpeed also accepts
// cycle_first_stair_count and cycle_second_stair_count but its formula never
// reads them, so they have no field here.
type OneCycleParams struct {
	CycleMinLR          float64 // cycle_min_lr, required
	CycleMaxLR          float64 // cycle_max_lr, required
	DecayLRRate         float64 // decay_lr_rate, e.g. 0 (no decay)
	CycleFirstStepSize  int     // cycle_first_step_size f, e.g. 2000, ≥ 1
	CycleSecondStepSize int     // cycle_second_step_size s; 0 means equal to f (DeepSpeed's None)
	DecayStepSize       int     // decay_step_size, e.g. 0 (no decay)
	CycleMomentum       bool    // cycle_momentum, e.g. true
	CycleMinMom         float64 // cycle_min_mom, e.g. 0.8
	CycleMaxMom         float64 // cycle_max_mom, e.g. 0.9
	DecayMomRate        float64 // decay_mom_rate, e.g. 0 (no decay)
}

// oneCycleBeta2 is the beta2 DeepSpeed's OneCycle pairs with every momentum.
const oneCycleBeta2 = 0.99

// OneCycle is DeepSpeed's 1cycle policy: one triangle from cycle_min_lr up to
// cycle_max_lr (f steps) and back (s steps), then an optional decay. With
// total = f+s, ratio = f/total, i = t+1, c = floor(1+i/total), x = 1+i/total−c:
//
//	scale = x/ratio if x ≤ ratio, else (x−1)/(ratio−1)
//	t < total:  lr = min_lr + (max_lr−min_lr)·scale
//	            beta1 = max_mom − (max_mom−min_mom)·scale
//	t ≥ total:  lr = min_lr / (1 + decay_lr_rate·n/decay_step_size),  n = t−total+1
//	            beta1 = max_mom · (1 + decay_mom_rate·n/decay_step_size)
//
// A zero decay_step_size or rate leaves lr at min_lr (beta1 at max_mom) after
// the cycle. With cycle_momentum, beta2 is 0.99 throughout.
//
// Before the first Step, lr is cycle_min_lr and, with cycle_momentum, the
// betas are (cycle_min_mom, 0.99): DeepSpeed's constructor writes min_mom
// into the optimizer, although the formula at t = -1 would give max_mom. So
// step 1 runs with beta1 = cycle_min_mom and step 2 with nearly
// cycle_max_mom.
type OneCycle struct {
	iteration
	p         OneCycleParams
	totalSize float64 // f+s
	stepRatio float64 // f/(f+s)
}

// NewOneCycle returns a OneCycle at last_batch_iteration -1.
func NewOneCycle(p OneCycleParams) (*OneCycle, error) {
	if p.CycleFirstStepSize < 1 {
		return nil, fmt.Errorf("scheduler OneCycle: cycle_first_step_size is %d, want ≥ 1", p.CycleFirstStepSize)
	}
	if p.CycleSecondStepSize < 0 {
		return nil, fmt.Errorf("scheduler OneCycle: cycle_second_step_size is %d, want ≥ 1 (or unset: equal to cycle_first_step_size)", p.CycleSecondStepSize)
	}
	if p.DecayStepSize < 0 {
		return nil, fmt.Errorf("scheduler OneCycle: decay_step_size is %d, want ≥ 0 (0: no decay)", p.DecayStepSize)
	}
	first := float64(p.CycleFirstStepSize)
	second := first
	if p.CycleSecondStepSize != 0 {
		second = float64(p.CycleSecondStepSize)
	}
	total := first + second
	return &OneCycle{iteration: newIteration(), p: p, totalSize: total, stepRatio: first / total}, nil
}

// scale is the position on the triangle, 0 at cycle_min_lr and 1 at the peak.
func (s *OneCycle) scale() float64 {
	i := float64(s.t + 1)
	cycle := math.Floor(1 + i/s.totalSize)
	x := 1 + i/s.totalSize - cycle
	if x <= s.stepRatio {
		return x / s.stepRatio
	}
	return (x - 1) / (s.stepRatio - 1)
}

// decayInterval is n/decay_step_size after the cycle; ok is false when the
// decay is off for a rate of the given value.
func (s *OneCycle) decayInterval(rate float64) (interval float64, ok bool) {
	if s.p.DecayStepSize == 0 || rate == 0 {
		return 0, false
	}
	n := float64(s.t) - s.totalSize + 1
	return n / float64(s.p.DecayStepSize), true
}

// LR ignores base: OneCycle sets absolute rates.
func (s *OneCycle) LR(base float64) float64 {
	if float64(s.t) < s.totalSize {
		return s.p.CycleMinLR + (s.p.CycleMaxLR-s.p.CycleMinLR)*s.scale()
	}
	if k, ok := s.decayInterval(s.p.DecayLRRate); ok {
		return s.p.CycleMinLR / (1 + s.p.DecayLRRate*k)
	}
	return s.p.CycleMinLR
}

// Momentum returns (beta1, 0.99, true) with cycle_momentum, else ok = false.
func (s *OneCycle) Momentum() (beta1, beta2 float64, ok bool) {
	if !s.p.CycleMomentum {
		return 0, 0, false
	}
	switch {
	case s.t < 0:
		return s.p.CycleMinMom, oneCycleBeta2, true
	case float64(s.t) < s.totalSize:
		return s.p.CycleMaxMom - (s.p.CycleMaxMom-s.p.CycleMinMom)*s.scale(), oneCycleBeta2, true
	}
	if k, ok := s.decayInterval(s.p.DecayMomRate); ok {
		return s.p.CycleMaxMom * (1 + s.p.DecayMomRate*k), oneCycleBeta2, true
	}
	return s.p.CycleMaxMom, oneCycleBeta2, true
}
