package kernels

import (
	"fmt"
	"math"

	"github.com/gotrain/gotrain/cuda"
)

// ceThreads is GT_CE_THREADS in crossentropy.cu: one block per row.
const ceThreads = 256

func ceCheck(op string, N, V, Vp int) error {
	if N < 0 || V <= 0 || Vp < V {
		panic("kernels: " + op + ": want N ≥ 0 and 0 < V ≤ Vp")
	}
	if N > math.MaxInt32 || Vp > math.MaxInt32 {
		return fmt.Errorf("kernels: %s: N=%d Vp=%d exceed the kernels' int range", op, N, Vp)
	}
	return nil
}

// CrossEntropyForward queues gt_crossentropy_forward: for each of N rows of
// logits (N,Vp), probs (N,Vp, F32) = softmax over the first V columns with
// the padded columns 0, and losses (N, F32) = −log probs[target]. targets
// is I32 (N); a target outside [0, V) gives a NaN loss.
func (s *Set) CrossEntropyForward(st cuda.Stream, losses, probs, logits, targets Tensor, N, V, Vp int) error {
	const op = "CrossEntropyForward"
	mustF32(op, "losses", losses)
	mustF32(op, "probs", probs)
	if targets.DT != I32 {
		panic("kernels: " + op + ": targets must be I32")
	}
	if err := ceCheck(op, N, V, Vp); err != nil || N == 0 {
		return err
	}
	return s.launch("gt_crossentropy_forward", st, blocksFor(N, 1), ceThreads,
		losses.Ptr, probs.Ptr, logits.Ptr, int32(logits.DT), targets.Ptr, int32(N), int32(V), int32(Vp))
}

// CrossEntropyBackward queues gt_crossentropy_backward: dlogits (N,Vp) =
// (probs − onehot(target))·dloss, padded columns 0. dlogits may be probs
// itself (the same F32 elements); any other overlap is the caller's to
// avoid. A target outside [0, V) makes its row's real columns NaN.
func (s *Set) CrossEntropyBackward(st cuda.Stream, dlogits, probs, targets Tensor, dloss float32, N, V, Vp int) error {
	const op = "CrossEntropyBackward"
	mustF32(op, "probs", probs)
	if targets.DT != I32 {
		panic("kernels: " + op + ": targets must be I32")
	}
	if err := ceCheck(op, N, V, Vp); err != nil || N == 0 {
		return err
	}
	return s.launch("gt_crossentropy_backward", st, blocksFor(N, 1), ceThreads,
		dlogits.Ptr, int32(dlogits.DT), probs.Ptr, targets.Ptr, dloss, int32(N), int32(V), int32(Vp))
}

// FusedClassifier queues gt_fused_classifier: for each of N rows of
// logits (N,Vp), losses (N, F32) = logsumexp − logits[target] over the
// first V columns and, when dloss ≠ 0, logits overwritten in place by
// (softmax − onehot(target))·dloss in its own dtype, padded columns 0. A
// target outside [0, V) gives a NaN loss and NaN real columns.
func (s *Set) FusedClassifier(st cuda.Stream, losses, logits, targets Tensor, dloss float32, N, V, Vp int) error {
	const op = "FusedClassifier"
	mustF32(op, "losses", losses)
	if targets.DT != I32 {
		panic("kernels: " + op + ": targets must be I32")
	}
	if err := ceCheck(op, N, V, Vp); err != nil || N == 0 {
		return err
	}
	write := int32(0)
	if dloss != 0 {
		write = 1
	}
	return s.launch("gt_fused_classifier", st, blocksFor(N, 1), ceThreads,
		losses.Ptr, logits.Ptr, int32(logits.DT), targets.Ptr, dloss, write, int32(N), int32(V), int32(Vp))
}
