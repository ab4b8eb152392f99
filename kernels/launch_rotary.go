package kernels

import "github.com/gotrain/gotrain/cuda"

// rotaryNorms panics unless qnorm, knorm and rstd are all given (float
// norms, an F32 rstd) or all the zero Tensor, and reports which.
func rotaryNorms(op string, rstd, qnorm, knorm Tensor) bool {
	norms := qnorm.Ptr != 0
	if (knorm.Ptr != 0) != norms || (rstd.Ptr != 0) != norms {
		panic("kernels: " + op + ": qnorm, knorm and rstd must be given together or not at all")
	}
	if norms {
		wantFloat(op, qnorm)
		wantFloat(op, knorm)
		wantDType(op, "rstd", rstd, F32)
	}
	return norms
}

// rotaryDims panics on what the rotary kernels cannot run (an odd head
// size, a non-float tensor, tables that are not F32), returns an error
// when a size does not fit the kernels' ints, and reports whether there is
// work.
func rotaryDims(op string, cos, sin Tensor, floats []Tensor, B, T, NH, KV, HD int) (bool, error) {
	if HD%2 != 0 {
		panic("kernels: " + op + ": head size HD must be even")
	}
	for _, t := range floats {
		wantFloat(op, t)
	}
	wantDType(op, "cos", cos, F32)
	wantDType(op, "sin", sin, F32)
	if err := dimsFit(op, B, T, NH, KV, HD, B*T, B*T*(NH+2*KV)*HD); err != nil {
		return false, err
	}
	return B*T > 0 && NH+KV > 0 && HD > 0, nil
}

// RotaryForward queues gt_qkv_rotary_forward over qkv (B,T,(NH+2·KV)·HD):
// with qnorm and knorm (HD each), every query and key head is RMS-normalised
// (eps) and rstd (F32, B·T·(NH+KV)) saved; then query and key heads are
// rotated at their position t by cos and sin (F32, (T, HD/2)) and value
// heads copied into out. Without norms, qnorm, knorm and rstd are the zero
// Tensor. out may alias qkv.
func (s *Set) RotaryForward(st cuda.Stream, out, rstd, qkv, qnorm, knorm, cos, sin Tensor, B, T, NH, KV, HD int, eps float32) error {
	const op = "RotaryForward"
	rotaryNorms(op, rstd, qnorm, knorm)
	work, err := rotaryDims(op, cos, sin, []Tensor{out, qkv}, B, T, NH, KV, HD)
	if err != nil || !work {
		return err
	}
	units := B * T * (NH + 2*KV)
	return s.launch("gt_qkv_rotary_forward", st, blocksFor(units, lnThreads/32), lnThreads,
		out.Ptr, int32(out.DT), rstd.Ptr, qkv.Ptr, int32(qkv.DT), qnorm.Ptr, int32(qnorm.DT), knorm.Ptr, int32(knorm.DT),
		cos.Ptr, sin.Ptr, int32(B*T), int32(T), int32(NH), int32(KV), int32(HD), eps)
}

// RotaryBackward queues gt_qkv_rotary_backward: dqkv = the gradient w.r.t.
// the forward's qkv (=) from dout, through the rotation and, with the norms
// (and the forward's rstd), their RMSNorm. dqkv may alias dout. The norms'
// own gradients come from RotaryBackwardPartial.
func (s *Set) RotaryBackward(st cuda.Stream, dqkv, dout, qkv, qnorm, knorm, rstd, cos, sin Tensor, B, T, NH, KV, HD int) error {
	const op = "RotaryBackward"
	floats := []Tensor{dqkv, dout}
	if rotaryNorms(op, rstd, qnorm, knorm) {
		floats = append(floats, qkv)
	}
	work, err := rotaryDims(op, cos, sin, floats, B, T, NH, KV, HD)
	if err != nil || !work {
		return err
	}
	units := B * T * (NH + 2*KV)
	return s.launch("gt_qkv_rotary_backward", st, blocksFor(units, lnThreads/32), lnThreads,
		dqkv.Ptr, int32(dqkv.DT), dout.Ptr, int32(dout.DT), qkv.Ptr, int32(qkv.DT), qnorm.Ptr, int32(qnorm.DT),
		knorm.Ptr, int32(knorm.DT), rstd.Ptr, cos.Ptr, sin.Ptr, int32(B*T), int32(T), int32(NH), int32(KV), int32(HD))
}

// RotaryPartialLen is how many F32 elements of scratch RotaryBackwardPartial
// writes for BT tokens and head size HD: the chunks' dqnorm partials, then
// as many dknorm partials (0 when BT or HD is 0).
func RotaryPartialLen(BT, HD int) int {
	chunks, _ := colChunks(BT)
	return 2 * chunks * HD
}

// RotaryBackwardPartial queues gt_qkv_rotary_backward_partial: the query
// and key norms' gradients as per-chunk column sums over tokens into
// partial (F32, RotaryPartialLen(B·T, HD)). MatmulDbiasReduce(dqnorm,
// partial, B·T, HD) and, on the second half, MatmulDbiasReduce(dknorm,
// partial[RotaryPartialLen/2:], B·T, HD) add them on in chunk order. It
// reads dout, so queue it before a RotaryBackward whose dqkv aliases dout.
func (s *Set) RotaryBackwardPartial(st cuda.Stream, partial, dout, qkv, rstd, cos, sin Tensor, B, T, NH, KV, HD int) error {
	const op = "RotaryBackwardPartial"
	wantDType(op, "partial", partial, F32)
	wantDType(op, "rstd", rstd, F32)
	work, err := rotaryDims(op, cos, sin, []Tensor{dout, qkv}, B, T, NH, KV, HD)
	if err != nil || !work {
		return err
	}
	chunks, rows := colChunks(B * T)
	threads := min(colThreads, rowThreads(2*HD))
	grid := cuda.Dim3{X: uint32((2*HD + threads - 1) / threads), Y: uint32(chunks), Z: 1}
	return s.launch3("gt_qkv_rotary_backward_partial", st, grid, cuda.Dim3{X: uint32(threads), Y: 1, Z: 1},
		partial.Ptr, dout.Ptr, int32(dout.DT), qkv.Ptr, int32(qkv.DT), rstd.Ptr, cos.Ptr, sin.Ptr,
		int32(B*T), int32(T), int32(NH), int32(KV), int32(HD), int32(rows))
}
