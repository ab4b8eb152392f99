package optim_test

import (
	"fmt"

	"github.com/gotrain/gotrain/optim"
)

// Optimizer step k runs with the scheduler's value at t = k−2: step 1 gets
// the start value, and the warmup reaches warmup_max_lr at step W+2.
func ExampleWarmupLR() {
	s, err := optim.NewWarmupLR(optim.WarmupLRParams{WarmupMaxLR: 1e-3, WarmupNumSteps: 4, WarmupType: optim.WarmupLinear})
	if err != nil {
		fmt.Println(err)
		return
	}
	for k := 1; k <= 6; k++ {
		fmt.Printf("step %d lr %.2e\n", k, s.LR(0))
		s.Step() // after a successful update only
	}
	// Output:
	// step 1 lr 0.00e+00
	// step 2 lr 0.00e+00
	// step 3 lr 2.50e-04
	// step 4 lr 5.00e-04
	// step 5 lr 7.50e-04
	// step 6 lr 1.00e-03
}
