package kernels

import "github.com/gotrain/gotrain/cuda"

// RMSNormForward queues gt_rmsnorm_forward over N rows of C: rstd (F32, N)
// = 1/sqrt(mean(inp²)+eps), saved for the backward pass, and out =
// inp·rstd·weight.
func (s *Set) RMSNormForward(st cuda.Stream, out, rstd, inp, weight Tensor, N, C int, eps float32) error {
	const op = "RMSNormForward"
	for _, t := range []Tensor{out, inp, weight} {
		wantFloat(op, t)
	}
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C); err != nil || N == 0 || C == 0 {
		return err
	}
	return s.launch("gt_rmsnorm_forward", st, blocksFor(N, lnThreads/32), lnThreads,
		out.Ptr, int32(out.DT), rstd.Ptr, inp.Ptr, int32(inp.DT), weight.Ptr, int32(weight.DT),
		int32(N), int32(C), eps)
}

// ResidualRMSNormForward queues gt_residual_rmsnorm_forward: residual
// (N,C) = a + b, then RMSNormForward(out, rstd, residual, weight), in one
// pass per row, bit-identical to Add then RMSNormForward. residual may
// alias a or b.
func (s *Set) ResidualRMSNormForward(st cuda.Stream, residual, out, rstd, a, b, weight Tensor, N, C int, eps float32) error {
	const op = "ResidualRMSNormForward"
	for _, t := range []Tensor{residual, out, a, b, weight} {
		wantFloat(op, t)
	}
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C); err != nil || N == 0 || C == 0 {
		return err
	}
	return s.launch("gt_residual_rmsnorm_forward", st, blocksFor(N, lnThreads/32), lnThreads,
		residual.Ptr, int32(residual.DT), out.Ptr, int32(out.DT), rstd.Ptr, a.Ptr, int32(a.DT), b.Ptr, int32(b.DT),
		weight.Ptr, int32(weight.DT), int32(N), int32(C), eps)
}

// RMSNormBackwardDinp queues gt_rmsnorm_backward_dinp: dinp (N,C) is
// overwritten with the input gradient, from dout, inp, weight and the
// forward pass's rstd (F32). dinp may alias dout or inp.
func (s *Set) RMSNormBackwardDinp(st cuda.Stream, dinp, dout, inp, weight, rstd Tensor, N, C int) error {
	const op = "RMSNormBackwardDinp"
	for _, t := range []Tensor{dinp, dout, inp, weight} {
		wantFloat(op, t)
	}
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C); err != nil || N == 0 || C == 0 {
		return err
	}
	return s.launch("gt_rmsnorm_backward_dinp", st, blocksFor(N, lnThreads/32), lnThreads,
		dinp.Ptr, int32(dinp.DT), dout.Ptr, int32(dout.DT), inp.Ptr, int32(inp.DT), weight.Ptr, int32(weight.DT),
		rstd.Ptr, int32(N), int32(C))
}

// RMSNormPartialLen is how many F32 elements of scratch
// RMSNormBackwardPartial writes for N rows of C (0 when N or C is 0).
func RMSNormPartialLen(N, C int) int {
	chunks, _ := colChunks(N)
	return chunks * C
}

// RMSNormBackwardPartial queues gt_rmsnorm_backward_partial: per-chunk
// column sums of dout·inp·rstd into partial (F32, RMSNormPartialLen(N,
// C)), which MatmulDbiasReduce(dweight, partial, N, C) adds onto dweight
// in chunk order.
func (s *Set) RMSNormBackwardPartial(st cuda.Stream, partial, dout, inp, rstd Tensor, N, C int) error {
	const op = "RMSNormBackwardPartial"
	wantFloat(op, dout)
	wantFloat(op, inp)
	wantDType(op, "partial", partial, F32)
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C, RMSNormPartialLen(N, C)); err != nil || N == 0 || C == 0 {
		return err
	}
	chunks, rows := colChunks(N)
	grid, block := colGrid(C, chunks)
	return s.launch3("gt_rmsnorm_backward_partial", st, grid, block,
		partial.Ptr, dout.Ptr, int32(dout.DT), inp.Ptr, int32(inp.DT), rstd.Ptr, int32(N), int32(C), int32(rows))
}
