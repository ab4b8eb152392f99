package optim

import (
	"fmt"
	"math"
)

// LRRangeTestParams mirror DeepSpeed's LRRangeTest params.
type LRRangeTestParams struct {
	MinLR     float64 // lr_range_test_min_lr, e.g. 1e-3
	StepSize  int     // lr_range_test_step_size, e.g. 2000, ≥ 1
	StepRate  float64 // lr_range_test_step_rate, e.g. 1.0
	Staircase bool    // lr_range_test_staircase, e.g. false
}

// LRRangeTest grows the rate without bound to find where training diverges:
//
//	lr = min_lr·(1 + step_rate·k),  k = (t+1)/step_size, floored if staircase
//
// which is min_lr before the first Step.
type LRRangeTest struct {
	iteration
	p LRRangeTestParams
}

// NewLRRangeTest returns an LRRangeTest at last_batch_iteration -1.
func NewLRRangeTest(p LRRangeTestParams) (*LRRangeTest, error) {
	if p.StepSize < 1 {
		return nil, fmt.Errorf("scheduler LRRangeTest: lr_range_test_step_size is %d, want ≥ 1", p.StepSize)
	}
	return &LRRangeTest{iteration: newIteration(), p: p}, nil
}

// LR ignores base: LRRangeTest sets absolute rates.
func (s *LRRangeTest) LR(base float64) float64 {
	k := float64(s.t+1) / float64(s.p.StepSize)
	if s.p.Staircase {
		k = math.Floor(k)
	}
	return s.p.MinLR * (1 + s.p.StepRate*k)
}

// Momentum reports that the optimizer's betas apply.
func (s *LRRangeTest) Momentum() (beta1, beta2 float64, ok bool) { return 0, 0, false }
