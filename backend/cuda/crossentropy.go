package cuda

import "github.com/gotrain/gotrain/backend"

// crossEntropyDims panics unless N ≥ 0, 0 < V ≤ Vp, probs is F32 (N,Vp)
// and targets I32 (N). Unlike the CPU backend it cannot look at the
// targets without waiting for the device; an out-of-range target makes
// the row's loss or gradients NaN instead.
func crossEntropyDims(op string, probs, targets backend.Buffer, N, V, Vp int) {
	if N < 0 || V <= 0 || Vp < V {
		panic("cuda: " + op + ": want N ≥ 0 and 0 < V ≤ Vp")
	}
	needLen(op, "probs", probs, N*Vp)
	needLen(op, "targets", targets, N)
	if probs.DType() != backend.F32 || targets.DType() != backend.I32 {
		panic("cuda: " + op + ": probs must be F32 and targets I32")
	}
}

// CrossEntropyForward implements backend.Backend: one block per row.
func (b *Backend) CrossEntropyForward(losses, probs, logits, targets backend.Buffer, N, V, Vp int) {
	const op = "cross-entropy forward"
	if b.hostOp(op, losses, probs, logits, targets) {
		b.host.CrossEntropyForward(losses, probs, logits, targets, N, V, Vp)
		return
	}
	crossEntropyDims(op, probs, targets, N, V, Vp)
	needLen(op, "losses", losses, N)
	needLen(op, "logits", logits, N*Vp)
	if losses.DType() != backend.F32 {
		panic("cuda: " + op + ": losses must be F32")
	}
	b.check(op, b.k.CrossEntropyForward(b.stream, b.t(op, losses), b.t(op, probs), b.t(op, logits),
		b.t(op, targets), N, V, Vp))
}

// CrossEntropyBackward implements backend.Backend. dlogits may be probs
// itself (the model's in-place use): the kernel reads each element before
// the same thread overwrites it. Any other overlap, such as 16-bit
// dlogits over the start of the F32 probs, would let one row's writes
// clobber probabilities another block has yet to read, so the gradients
// then go through scratch and are copied in afterwards.
func (b *Backend) CrossEntropyBackward(dlogits, probs, targets backend.Buffer, dloss float32, N, V, Vp int) {
	const op = "cross-entropy backward"
	if b.hostOp(op, dlogits, probs, targets) {
		b.host.CrossEntropyBackward(dlogits, probs, targets, dloss, N, V, Vp)
		return
	}
	crossEntropyDims(op, probs, targets, N, V, Vp)
	needLen(op, "dlogits", dlogits, N*Vp)
	if !dlogits.DType().IsFloat() {
		panic("cuda: " + op + ": dlogits must be a float buffer")
	}
	dst, p, tg := b.t(op, dlogits), b.t(op, probs), b.t(op, targets)
	if !overlaps(dlogits, probs) || (dlogits.DType() == probs.DType() && dlogits.Off() == probs.Off()) {
		b.check(op, b.k.CrossEntropyBackward(b.stream, dst, p, tg, dloss, N, V, Vp))
		return
	}
	tmp, release, ok := b.scratch(dst.DT, N*Vp)
	if !ok {
		return
	}
	defer release()
	if err := b.k.CrossEntropyBackward(b.stream, tmp, p, tg, dloss, N, V, Vp); err != nil {
		b.check(op, err)
		return
	}
	b.check(op, b.dev.CopyDtoDAsync(dst.Ptr, tmp.Ptr, dlogits.Bytes(), b.stream))
}

// overlaps reports whether two views share any byte of one allocation.
func overlaps(x, y backend.Buffer) bool {
	if !backend.Same(x, y) || x.Len() == 0 || y.Len() == 0 {
		return false
	}
	return x.ByteOff() < y.ByteOff()+y.Bytes() && y.ByteOff() < x.ByteOff()+x.Bytes()
}

// FusedClassifier implements backend.Backend: one block per row reads the
// row once for the softmax statistics and once more to overwrite it with
// dlogits (kernels' gt_fused_classifier, llm.c's fused_classifier).
func (b *Backend) FusedClassifier(losses, logits, targets backend.Buffer, dloss float32, N, V, Vp int) {
	const op = "fused classifier"
	if b.hostOp(op, losses, logits, targets) {
		b.host.FusedClassifier(losses, logits, targets, dloss, N, V, Vp)
		return
	}
	if N < 0 || V <= 0 || Vp < V {
		panic("cuda: " + op + ": want N ≥ 0 and 0 < V ≤ Vp")
	}
	needLen(op, "losses", losses, N)
	needLen(op, "logits", logits, N*Vp)
	needLen(op, "targets", targets, N)
	if losses.DType() != backend.F32 || targets.DType() != backend.I32 || !logits.DType().IsFloat() {
		panic("cuda: " + op + ": losses must be F32, targets I32 and logits a float type")
	}
	b.check(op, b.k.FusedClassifier(b.stream, b.t(op, losses), b.t(op, logits), b.t(op, targets), dloss, N, V, Vp))
}
