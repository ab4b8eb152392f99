package cpu

import "github.com/gotrain/gotrain/backend"

// AddSum implements backend.Backend: one float64 sum in index order, as
// the CUDA kernel's result is independent of scheduling too.
func (be *Backend) AddSum(acc, x backend.Buffer) {
	const op = "AddSum"
	checkLen(op, "acc", acc, 1)
	a, xs := f32s(op, acc), f32s(op, x)
	var s float64
	for _, v := range xs {
		s += float64(v)
	}
	a[0] = float32(float64(a[0]) + s)
}
