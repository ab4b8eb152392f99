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

// attGeometry validates the attention dimensions and returns the score
// scale 1/sqrt(HD), computed as the CPU backend does.
func attGeometry(op string, B, T, NH, KV, HD int) (scale float32, err error) {
	if B < 0 || T < 0 || NH <= 0 || KV <= 0 || HD <= 0 || NH%KV != 0 {
		panic("kernels: " + op + ": want B, T ≥ 0, positive NH, KV and HD, and NH a multiple of KV")
	}
	// The kernels take the dimensions as int and index with long long;
	// qkv's (NH+2·KV)·HD row stride must stay within int, and B·NH·T rows
	// within int64, which int32 dimensions guarantee.
	if B > math.MaxInt32 || T > math.MaxInt32 || NH > math.MaxInt32 || (NH+2*KV)*HD > math.MaxInt32 {
		return 0, fmt.Errorf("kernels: %s: B=%d T=%d NH=%d KV=%d HD=%d exceed the kernels' int range", op, B, T, NH, KV, HD)
	}
	return float32(1 / math.Sqrt(float64(HD))), nil
}

func mustF32(op, name string, t Tensor) {
	if t.DT != F32 {
		panic("kernels: " + op + ": " + name + " must be F32")
	}
}

// AttentionForward queues gt_attention_forward: out (B,T,NH·HD) and the
// log-sum-exp lse (B,NH,T, F32) of each query row's scaled scores from qkv
// (B,T,(NH+2·KV)·HD), causal, query head h on key/value head h/(NH/KV),
// scale 1/sqrt(HD).
func (s *Set) AttentionForward(st cuda.Stream, out, lse, qkv Tensor, B, T, NH, KV, HD int) error {
	const op = "AttentionForward"
	mustF32(op, "lse", lse)
	scale, err := attGeometry(op, B, T, NH, KV, HD)
	if rows := B * NH * T; err != nil || rows == 0 {
		return err
	}
	return s.launch("gt_attention_forward", st, blocksFor(B*NH*T, attWarps), attThreads,
		out.Ptr, int32(out.DT), lse.Ptr, qkv.Ptr, int32(qkv.DT), int32(B), int32(T), int32(NH), int32(KV), int32(HD), scale)
}

// AttentionBackwardQuery queues gt_attention_backward_query, the first half
// of the attention backward pass: the query third of dqkv (B,T,(NH+2·KV)·HD)
// from dout and out (B,T,NH·HD), qkv and lse, and D = rowsum(dout∘out)
// into dd (B,NH,T, F32 workspace), which AttentionBackwardKV reads: it
// must follow on the same stream.
func (s *Set) AttentionBackwardQuery(st cuda.Stream, dqkv, dd, dout, out, qkv, lse Tensor, B, T, NH, KV, HD int) error {
	const op = "AttentionBackwardQuery"
	mustF32(op, "dd", dd)
	mustF32(op, "lse", lse)
	scale, err := attGeometry(op, B, T, NH, KV, HD)
	if rows := B * NH * T; err != nil || rows == 0 {
		return err
	}
	return s.launch("gt_attention_backward_query", st, blocksFor(B*NH*T, attWarps), attThreads,
		dqkv.Ptr, int32(dqkv.DT), dd.Ptr, dout.Ptr, int32(dout.DT), out.Ptr, int32(out.DT), qkv.Ptr, int32(qkv.DT), lse.Ptr,
		int32(B), int32(T), int32(NH), int32(KV), int32(HD), scale)
}

// AttentionBackwardKV queues gt_attention_backward_kv, the second half of
// the attention backward pass: the key and value thirds of dqkv, each key
// row summing over the NH/KV query heads that share it, from the dd that
// AttentionBackwardQuery wrote, dout, qkv and lse.
func (s *Set) AttentionBackwardKV(st cuda.Stream, dqkv, dd, dout, qkv, lse Tensor, B, T, NH, KV, HD int) error {
	const op = "AttentionBackwardKV"
	mustF32(op, "dd", dd)
	mustF32(op, "lse", lse)
	scale, err := attGeometry(op, B, T, NH, KV, HD)
	if rows := B * KV * T; err != nil || rows == 0 {
		return err
	}
	return s.launch("gt_attention_backward_kv", st, blocksFor(B*KV*T, attWarps), attThreads,
		dqkv.Ptr, int32(dqkv.DT), dd.Ptr, dout.Ptr, int32(dout.DT), qkv.Ptr, int32(qkv.DT), lse.Ptr,
		int32(B), int32(T), int32(NH), int32(KV), int32(HD), scale)
}
