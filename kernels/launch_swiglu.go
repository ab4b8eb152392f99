package kernels

import "github.com/gotrain/gotrain/cuda"

// SwiGLUForward queues gt_swiglu_forward: out (N,I) = silu(gate)·up from
// inp (N,2·I), each row [gate | up].
func (s *Set) SwiGLUForward(st cuda.Stream, out, inp Tensor, N, I int) error {
	const op = "SwiGLUForward"
	wantFloat(op, out)
	wantFloat(op, inp)
	if err := dimsFit(op, N, I, 2*I); err != nil || N == 0 || I == 0 {
		return err
	}
	return s.launch("gt_swiglu_forward", st, blocksFor(N*packs(I), ewThreads), ewThreads,
		out.Ptr, int32(out.DT), inp.Ptr, int32(inp.DT), int32(N), int32(I))
}

// SwiGLUBackward queues gt_swiglu_backward: dinp (N,2·I) = the gradient
// w.r.t. inp (=), from dout (N,I). dinp may alias inp.
func (s *Set) SwiGLUBackward(st cuda.Stream, dinp, dout, inp Tensor, N, I int) error {
	const op = "SwiGLUBackward"
	for _, t := range []Tensor{dinp, dout, inp} {
		wantFloat(op, t)
	}
	if err := dimsFit(op, N, I, 2*I); err != nil || N == 0 || I == 0 {
		return err
	}
	return s.launch("gt_swiglu_backward", st, blocksFor(N*packs(I), ewThreads), ewThreads,
		dinp.Ptr, int32(dinp.DT), dout.Ptr, int32(dout.DT), inp.Ptr, int32(inp.DT), int32(N), int32(I))
}
