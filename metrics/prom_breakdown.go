package metrics

import "fmt"

// Breakdown accumulates DeepSpeed's wall_clock_breakdown timers over
// optimizer steps and prints their mean per step. Used by one goroutine.
type Breakdown struct {
	forward, backward, reduce, step float64 // summed seconds
	steps                           int
}

// Add records one optimizer step's seconds: forward and backward over every
// micro-step, reduce the gradient all-reduce / reduce-scatter part, step the
// optimizer update. As in DeepSpeed, backward includes the reduce
// (bwd = bwd_inner + bwd_allreduce); the line prints both.
func (b *Breakdown) Add(forward, backward, reduce, step float64) {
	b.forward += forward
	b.backward += backward
	b.reduce += reduce
	b.step += step
	b.steps++
}

// Steps is how many steps were added since the last Reset.
func (b *Breakdown) Steps() int { return b.steps }

// Reset forgets every step, as DeepSpeed resets its timers after each log.
func (b *Breakdown) Reset() { *b = Breakdown{} }

// Line is DeepSpeed's timer log line with the mean per step in
// milliseconds, two decimals:
//
//	time (ms) | fwd: 12.34 | bwd: 40.00 | bwd_allreduce: 5.00 | step: 3.21
//
// With no steps every time is 0.
func (b *Breakdown) Line() string {
	n := float64(b.steps)
	if n == 0 {
		n = 1
	}
	ms := func(s float64) float64 { return s * 1000 / n }
	return fmt.Sprintf("time (ms) | fwd: %.2f | bwd: %.2f | bwd_allreduce: %.2f | step: %.2f",
		ms(b.forward), ms(b.backward), ms(b.reduce), ms(b.step))
}
