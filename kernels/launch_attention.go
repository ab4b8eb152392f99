package kernels

import (
	"fmt"
	"math"

	"github.com/gotrain/gotrain/cuda"
)

// attThreads and attWarps are GT_ATT_THREADS and GT_ATT_WARPS in
// attention.cu: the block size every attention kernel is written for, and
// the rows (one per warp) a block takes at a time.
const (
	attThreads = 128
	attWarps   = attThreads / 32
)

// attGeometry validates the attention dimensions and returns the number of
// rows (B·NH·T) the kernels walk, one warp per row, and the score scale
// 1/sqrt(HS), computed as the CPU backend does.
func attGeometry(op string, B, T, C, NH int) (rows int, scale float32, err error) {
	if B < 0 || T < 0 || C <= 0 || NH <= 0 || C%NH != 0 {
		panic("kernels: " + op + ": want B, T ≥ 0 and C a positive multiple of NH")
	}
	// The kernels take the dimensions as int and index with long long;
	// qkv's 3C stride and a T×T row offset must stay within int64, which
	// int32 dimensions guarantee.
	if B > math.MaxInt32 || T > math.MaxInt32 || C > math.MaxInt32/3 {
		return 0, 0, fmt.Errorf("kernels: %s: B=%d T=%d C=%d exceed the kernels' int range", op, B, T, C)
	}
	return B * NH * T, float32(1 / math.Sqrt(float64(C/NH))), nil
}

func mustF32(op, name string, t Tensor) {
	if t.DT != F32 {
		panic("kernels: " + op + ": " + name + " must be F32")
	}
}

// AttentionForward queues gt_attention_forward: out (B,T,C) and the softmax
// probabilities att (B,NH,T,T, F32, zero above the diagonal) from qkv
// (B,T,3C), causal, scale 1/sqrt(C/NH).
func (s *Set) AttentionForward(st cuda.Stream, out, att, qkv Tensor, B, T, C, NH int) error {
	const op = "AttentionForward"
	mustF32(op, "att", att)
	rows, scale, err := attGeometry(op, B, T, C, NH)
	if err != nil || rows == 0 {
		return err
	}
	return s.launch("gt_attention_forward", st, blocksFor(rows, attWarps), attThreads,
		out.Ptr, int32(out.DT), att.Ptr, qkv.Ptr, int32(qkv.DT), int32(B), int32(T), int32(C), int32(NH), scale)
}

// AttentionBackwardQuery queues gt_attention_backward_query, the first half
// of the attention backward pass: the score gradients into datt
// (B,NH,T,T, F32 scratch, zero above the diagonal) and the q third of dqkv
// (B,T,3C). AttentionBackwardKV must follow on the same stream.
func (s *Set) AttentionBackwardQuery(st cuda.Stream, dqkv, datt, dout, qkv, att Tensor, B, T, C, NH int) error {
	const op = "AttentionBackwardQuery"
	mustF32(op, "datt", datt)
	mustF32(op, "att", att)
	rows, scale, err := attGeometry(op, B, T, C, NH)
	if err != nil || rows == 0 {
		return err
	}
	return s.launch("gt_attention_backward_query", st, blocksFor(rows, attWarps), attThreads,
		dqkv.Ptr, int32(dqkv.DT), datt.Ptr, dout.Ptr, int32(dout.DT), qkv.Ptr, int32(qkv.DT), att.Ptr,
		int32(B), int32(T), int32(C), int32(NH), scale)
}

// AttentionBackwardKV queues gt_attention_backward_kv, the second half of
// the attention backward pass: the k and v thirds of dqkv (B,T,3C) from the
// datt that AttentionBackwardQuery wrote, att, qkv and dout (B,T,C).
func (s *Set) AttentionBackwardKV(st cuda.Stream, dqkv, datt, dout, qkv, att Tensor, B, T, C, NH int) error {
	const op = "AttentionBackwardKV"
	mustF32(op, "datt", datt)
	mustF32(op, "att", att)
	rows, _, err := attGeometry(op, B, T, C, NH)
	if err != nil || rows == 0 {
		return err
	}
	return s.launch("gt_attention_backward_kv", st, blocksFor(rows, attWarps), attThreads,
		dqkv.Ptr, int32(dqkv.DT), datt.Ptr, dout.Ptr, int32(dout.DT), qkv.Ptr, int32(qkv.DT), att.Ptr,
		int32(B), int32(T), int32(C), int32(NH))
}
