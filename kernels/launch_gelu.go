package kernels

import "github.com/gotrain/gotrain/cuda"

// GeluForward queues gt_gelu_forward: out = GELU(inp) (tanh form) over n
// elements of any float dtypes; out may alias inp.
func (s *Set) GeluForward(st cuda.Stream, out, inp Tensor, n int) error {
	if !elemArgs("GeluForward", n, out, inp) {
		return nil
	}
	return s.launch("gt_gelu_forward", st, blocksFor(packs(n), ewThreads), ewThreads,
		out.Ptr, int32(out.DT), inp.Ptr, int32(inp.DT), int64(n))
}

// GeluBackward queues gt_gelu_backward: dinp = GELU'(inp)·dout over n
// elements (overwritten, not accumulated); dinp may alias dout or inp.
func (s *Set) GeluBackward(st cuda.Stream, dinp, inp, dout Tensor, n int) error {
	if !elemArgs("GeluBackward", n, dinp, inp, dout) {
		return nil
	}
	return s.launch("gt_gelu_backward", st, blocksFor(packs(n), ewThreads), ewThreads,
		dinp.Ptr, int32(dinp.DT), inp.Ptr, int32(inp.DT), dout.Ptr, int32(dout.DT), int64(n))
}
