package kernels

import (
	"math"

	"github.com/gotrain/gotrain/cuda"
)

// adamwThreads is the block size of the elementwise AdamW update.
const adamwThreads = 256

// AdamWArgs are the hyperparameters of one AdamW update, as
// backend.AdamWParams: Step is the 1-based optimizer step of the bias
// corrections, GradScale multiplies every gradient, WeightDecay is 0 for
// undecayed tensors.
type AdamWArgs struct {
	LR, Beta1, Beta2, Eps, WeightDecay, GradScale float32
	Step                                          int
}

// AdamW queues gt_adamw over n elements: m and v (F32) are updated from
// grad, and the weights, master (F32) when master.Ptr is not 0, else param
// itself; with a master, param receives the new master rounded to its
// dtype. The bias corrections 1−β^Step are computed here in float64 and
// rounded to float32 once, as the CPU backend does.
func (s *Set) AdamW(st cuda.Stream, param, master, grad, m, v Tensor, n int, a AdamWArgs) error {
	const op = "AdamW"
	mustF32(op, "m", m)
	mustF32(op, "v", v)
	if master.Ptr != 0 {
		mustF32(op, "master", master)
	}
	if n < 0 || a.Step < 1 {
		panic("kernels: AdamW: want n ≥ 0 and Step ≥ 1")
	}
	if n == 0 {
		return nil
	}
	bc1 := float32(1 - math.Pow(float64(a.Beta1), float64(a.Step)))
	bc2 := float32(1 - math.Pow(float64(a.Beta2), float64(a.Step)))
	return s.launch("gt_adamw", st, blocksFor(packs(n), adamwThreads), adamwThreads,
		param.Ptr, int32(param.DT), master.Ptr, grad.Ptr, int32(grad.DT), m.Ptr, v.Ptr, int64(n),
		a.LR, a.Beta1, a.Beta2, a.Eps, a.WeightDecay, a.GradScale, bc1, bc2)
}
