package kernels

import "github.com/gotrain/gotrain/cuda"

// lnThreads is the block size of the LayerNorm row kernels: four warps,
// one row each.
const lnThreads = 128

// LayerNormForward queues gt_layernorm_forward over N rows of C: out =
// (inp−mean)·rstd·weight + bias with eps 1e-5; mean and rstd (F32, N) are
// saved for the backward pass.
func (s *Set) LayerNormForward(st cuda.Stream, out, mean, rstd, inp, weight, bias Tensor, N, C int) error {
	const op = "LayerNormForward"
	for _, t := range []Tensor{out, inp, weight, bias} {
		wantFloat(op, t)
	}
	wantDType(op, "mean", mean, F32)
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C); err != nil || N == 0 || C == 0 {
		return err
	}
	return s.launch("gt_layernorm_forward", st, blocksFor(N, lnThreads/32), lnThreads,
		out.Ptr, int32(out.DT), mean.Ptr, rstd.Ptr, inp.Ptr, int32(inp.DT), weight.Ptr, int32(weight.DT),
		bias.Ptr, int32(bias.DT), int32(N), int32(C))
}

// ResidualLayerNormForward queues gt_residual_layernorm_forward:
// residual (N,C) = a + b, then LayerNormForward(out, mean, rstd, residual,
// weight, bias), in one pass per row. residual may alias a or b.
func (s *Set) ResidualLayerNormForward(st cuda.Stream, residual, out, mean, rstd, a, b, weight, bias Tensor, N, C int) error {
	const op = "ResidualLayerNormForward"
	for _, t := range []Tensor{residual, out, a, b, weight, bias} {
		wantFloat(op, t)
	}
	wantDType(op, "mean", mean, F32)
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C); err != nil || N == 0 || C == 0 {
		return err
	}
	return s.launch("gt_residual_layernorm_forward", st, blocksFor(N, lnThreads/32), lnThreads,
		residual.Ptr, int32(residual.DT), out.Ptr, int32(out.DT), mean.Ptr, rstd.Ptr, a.Ptr, int32(a.DT),
		b.Ptr, int32(b.DT), weight.Ptr, int32(weight.DT), bias.Ptr, int32(bias.DT), int32(N), int32(C))
}

// LayerNormBackwardDinp queues gt_layernorm_backward_dinp: dinp (N,C) is
// overwritten with the input gradient, from dout, inp, weight and the
// forward pass's mean and rstd (F32).
func (s *Set) LayerNormBackwardDinp(st cuda.Stream, dinp, dout, inp, weight, mean, rstd Tensor, N, C int) error {
	const op = "LayerNormBackwardDinp"
	for _, t := range []Tensor{dinp, dout, inp, weight} {
		wantFloat(op, t)
	}
	wantDType(op, "mean", mean, F32)
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C); err != nil || N == 0 || C == 0 {
		return err
	}
	return s.launch("gt_layernorm_backward_dinp", st, blocksFor(N, lnThreads/32), lnThreads,
		dinp.Ptr, int32(dinp.DT), dout.Ptr, int32(dout.DT), inp.Ptr, int32(inp.DT), weight.Ptr, int32(weight.DT),
		mean.Ptr, rstd.Ptr, int32(N), int32(C))
}

// LayerNormPartialLen is how many F32 elements of scratch
// LayerNormBackwardPartial writes for N rows of C (0 when N or C is 0).
func LayerNormPartialLen(N, C int) int {
	chunks, _ := colChunks(N)
	return 2 * chunks * C
}

// LayerNormBackwardPartial queues gt_layernorm_backward_partial: per-chunk
// column sums of n·dout and dout (n the normalized input) into partial
// (F32, LayerNormPartialLen(N, C)), which LayerNormBackwardReduce adds
// onto dweight and dbias.
func (s *Set) LayerNormBackwardPartial(st cuda.Stream, partial, dout, inp, mean, rstd Tensor, N, C int) error {
	const op = "LayerNormBackwardPartial"
	wantFloat(op, dout)
	wantFloat(op, inp)
	wantDType(op, "partial", partial, F32)
	wantDType(op, "mean", mean, F32)
	wantDType(op, "rstd", rstd, F32)
	if err := dimsFit(op, N, C, LayerNormPartialLen(N, C)); err != nil || N == 0 || C == 0 {
		return err
	}
	chunks, rows := colChunks(N)
	grid, block := colGrid(C, chunks)
	return s.launch3("gt_layernorm_backward_partial", st, grid, block,
		partial.Ptr, dout.Ptr, int32(dout.DT), inp.Ptr, int32(inp.DT), mean.Ptr, rstd.Ptr,
		int32(N), int32(C), int32(rows))
}

// LayerNormBackwardReduce queues gt_layernorm_backward_reduce: dweight (C)
// and dbias (C) += the chunk sums LayerNormBackwardPartial wrote for the
// same N and C, chunks in order.
func (s *Set) LayerNormBackwardReduce(st cuda.Stream, dweight, dbias, partial Tensor, N, C int) error {
	const op = "LayerNormBackwardReduce"
	wantFloat(op, dweight)
	wantFloat(op, dbias)
	wantDType(op, "partial", partial, F32)
	if err := dimsFit(op, N, C); err != nil || N == 0 || C == 0 {
		return err
	}
	chunks, _ := colChunks(N)
	return s.launch("gt_layernorm_backward_reduce", st, blocksFor(C, 128), 128,
		dweight.Ptr, int32(dweight.DT), dbias.Ptr, int32(dbias.DT), partial.Ptr, int32(chunks), int32(C))
}
