package kernels

import "github.com/gotrain/gotrain/cuda"

// encGroupThreads is GT_ENC_GROUP_THREADS in encoder.cu.
const encGroupThreads = 256

// EncoderForward queues gt_encoder_forward: out (B,T,C) = wte[inp] + wpe[t]
// with inp I32 (B,T), wte (V,C) and wpe (at least T rows of C; a null Ptr
// adds no positions). A token id outside [0, V) gives a row of NaN (the
// device cannot report it).
func (s *Set) EncoderForward(st cuda.Stream, out, inp, wte, wpe Tensor, B, T, C, V int) error {
	const op = "EncoderForward"
	wantFloat(op, out)
	wantFloat(op, wte)
	wantFloat(op, wpe)
	wantDType(op, "inp", inp, I32)
	if err := dimsFit(op, B, T, C, V, B*T); err != nil || B*T == 0 || C == 0 {
		return err
	}
	return s.launch("gt_encoder_forward", st, blocksFor(B*T, 1), rowThreads(C),
		out.Ptr, int32(out.DT), inp.Ptr, wte.Ptr, int32(wte.DT), wpe.Ptr, int32(wpe.DT),
		int32(B*T), int32(T), int32(C), int32(V))
}

// EncoderGroupLen is how many I32 elements of scratch EncoderGroup needs
// for n = B·T positions: order (n) followed by groups (2n).
func EncoderGroupLen(n int) int { return 3 * n }

// EncoderGroup queues gt_encoder_group, the first step of the encoder's
// backward pass: it ranks the n positions of inp (I32) by (token id,
// position) into order (I32, n) and groups (I32, 2n), which
// EncoderBackwardWTE reads.
func (s *Set) EncoderGroup(st cuda.Stream, order, groups, inp Tensor, n int) error {
	const op = "EncoderGroup"
	wantDType(op, "order", order, I32)
	wantDType(op, "groups", groups, I32)
	wantDType(op, "inp", inp, I32)
	if err := dimsFit(op, n, 2*n); err != nil || n == 0 {
		return err
	}
	return s.launch("gt_encoder_group", st, blocksFor(n, encGroupThreads), encGroupThreads,
		order.Ptr, groups.Ptr, inp.Ptr, int32(n))
}

// EncoderBackwardWTE queues gt_encoder_backward_wte: dwte (V,C) += dout
// (n,C) rows summed by token id, from inp (I32, n) and EncoderGroup's
// order and groups for the same inp. Each touched dwte row is loaded and
// rounded once, its dout rows added in position order. Ids outside
// [0, V) are skipped.
func (s *Set) EncoderBackwardWTE(st cuda.Stream, dwte, dout, inp, order, groups Tensor, n, C, V int) error {
	const op = "EncoderBackwardWTE"
	wantFloat(op, dwte)
	wantFloat(op, dout)
	wantDType(op, "inp", inp, I32)
	wantDType(op, "order", order, I32)
	wantDType(op, "groups", groups, I32)
	if err := dimsFit(op, n, 2*n, C, V); err != nil || n == 0 || C == 0 {
		return err
	}
	return s.launch("gt_encoder_backward_wte", st, blocksFor(n, 1), rowThreads(C),
		dwte.Ptr, int32(dwte.DT), dout.Ptr, int32(dout.DT), inp.Ptr, order.Ptr, groups.Ptr,
		int32(n), int32(C), int32(V))
}

// EncoderBackwardWPE queues gt_encoder_backward_wpe: dwpe[t] += Σ_b
// dout[b,t] for the first T rows of dwpe, dout (B,T,C), b in order.
func (s *Set) EncoderBackwardWPE(st cuda.Stream, dwpe, dout Tensor, B, T, C int) error {
	const op = "EncoderBackwardWPE"
	wantFloat(op, dwpe)
	wantFloat(op, dout)
	if err := dimsFit(op, B, T, C); err != nil || T == 0 || C == 0 {
		return err
	}
	return s.launch("gt_encoder_backward_wpe", st, blocksFor(T, 1), rowThreads(C),
		dwpe.Ptr, int32(dwpe.DT), dout.Ptr, int32(dout.DT), int32(B), int32(T), int32(C))
}
