package optim

import "fmt"

// Scheduler gives the learning rate (and, for OneCycle, the Adam betas) of
// the current optimizer step, DeepSpeed's way.
//
// Timing, as in DeepSpeed's engine (optimizer.step, then scheduler.step):
// a new scheduler is at last_batch_iteration t = -1 and reports its start
// value; Step advances t by one and is called once after every successful
// optimizer step, never after a step skipped on fp16 overflow. So optimizer
// step k (k = 1, 2, …, counting successful steps) runs with the value at
// t = k − 2, and step 1 with the start value.
//
// A Scheduler is not safe for concurrent use.
type Scheduler interface {
	// LR is the learning rate of the current step. base is the optimizer's
	// configured lr; only WarmupCosineLR (a ratio of it) and Constant use it.
	LR(base float64) float64
	// Momentum is (beta1, beta2) of the current step when the scheduler
	// cycles momentum (OneCycle with cycle_momentum); ok is false otherwise
	// and the optimizer's own betas apply.
	Momentum() (beta1, beta2 float64, ok bool)
	// Step moves to the next step: t++.
	Step()
	// State is what a checkpoint stores; Restore puts it back.
	State() SchedulerState
	Restore(SchedulerState) error
}

// SchedulerState is DeepSpeed's scheduler state_dict, {"last_batch_iteration": t}:
// -1 before the first Step, n after n Steps.
type SchedulerState struct {
	LastBatchIteration int `json:"last_batch_iteration"`
}

// iteration is the last_batch_iteration counter every scheduler shares.
type iteration struct {
	t int
}

func newIteration() iteration { return iteration{t: -1} }

// Step advances last_batch_iteration by one.
func (it *iteration) Step() { it.t++ }

// State returns last_batch_iteration.
func (it *iteration) State() SchedulerState {
	return SchedulerState{LastBatchIteration: it.t}
}

// Restore sets last_batch_iteration, which must be -1 or more.
func (it *iteration) Restore(s SchedulerState) error {
	if s.LastBatchIteration < -1 {
		return fmt.Errorf("restore scheduler: last_batch_iteration %d is below -1", s.LastBatchIteration)
	}
	it.t = s.LastBatchIteration
	return nil
}

// Constant is the schedule when the config has no scheduler block: every
// step uses the optimizer's lr.
type Constant struct {
	iteration
}

// NewConstant returns a Constant at last_batch_iteration -1. It still counts
// steps so that a checkpoint records them like any other scheduler's.
func NewConstant() *Constant { return &Constant{iteration: newIteration()} }

// LR returns base.
func (c *Constant) LR(base float64) float64 { return base }

// Momentum reports that the optimizer's betas apply.
func (c *Constant) Momentum() (beta1, beta2 float64, ok bool) { return 0, 0, false }
