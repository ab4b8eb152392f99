package cuda

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
)

// EncoderForward implements backend.Backend. Token ids cannot be checked
// against wte without reading them back; an id out of range gives a row
// of NaN (which the loss then shows) instead of a stray read. Without wpe
// the kernel gets a null position table and adds nothing.
func (b *Backend) EncoderForward(out, inp, wte, wpe backend.Buffer, B, T, C int) {
	const op = "encoder forward"
	if b.hostOp(op, out, inp, wte, wpe) {
		b.host.EncoderForward(out, inp, wte, wpe, B, T, C)
		return
	}
	needLen(op, "out", out, B*T*C)
	needLen(op, "inp", inp, B*T)
	V := embeddingRows(op, inp, wte, wpe, T, C)
	pos := kernels.Tensor{DT: kernels.F32} // null: no learned positions
	if !wpe.IsNil() {
		pos = b.t(op, wpe)
	}
	b.check(op, b.k.EncoderForward(b.stream, b.t(op, out), b.t(op, inp), b.t(op, wte), pos, B, T, C, V))
}

// EncoderBackward implements backend.Backend without float atomics: the
// positions are grouped by token on the device (a stable ranking), then
// each dwte row receives its positions' dout rows in position order, as
// the CPU backend sums them; dwpe (when given) sums over b in order.
// Without dwte (frozen embeddings) nothing is done.
func (b *Backend) EncoderBackward(dwte, dwpe, dout, inp backend.Buffer, B, T, C int) {
	const op = "encoder backward"
	if dwte.IsNil() {
		if !dwpe.IsNil() {
			panic("cuda: " + op + ": dwpe without dwte")
		}
		return // frozen embeddings
	}
	if b.hostOp(op, dwte, dwpe, dout, inp) {
		b.host.EncoderBackward(dwte, dwpe, dout, inp, B, T, C)
		return
	}
	needLen(op, "dout", dout, B*T*C)
	needLen(op, "inp", inp, B*T)
	V := embeddingRows(op, inp, dwte, dwpe, T, C)
	n := B * T
	ids, dw, d := b.t(op, inp), b.t(op, dwte), b.t(op, dout)
	scratch, release, ok := b.scratch(kernels.I32, kernels.EncoderGroupLen(n))
	if !ok {
		return
	}
	defer release()
	order := scratch
	groups := kernels.Tensor{Ptr: scratch.Ptr.Add(4 * n), DT: kernels.I32}
	b.check(op, b.k.EncoderGroup(b.stream, order, groups, ids, n))
	b.check(op, b.k.EncoderBackwardWTE(b.stream, dw, d, ids, order, groups, n, C, V))
	if !dwpe.IsNil() {
		b.check(op, b.k.EncoderBackwardWPE(b.stream, b.t(op, dwpe), d, B, T, C))
	}
}

// embeddingRows checks the embedding shapes as the CPU backend does
// (inp I32, wte and wpe whole rows of C, wpe, when given, at least T rows)
// and returns the rows of wte.
func embeddingRows(op string, inp, wte, wpe backend.Buffer, T, C int) int {
	if inp.DType() != backend.I32 {
		panic("cuda: " + op + ": inp must be I32")
	}
	if C <= 0 || wte.Len()%C != 0 || (!wpe.IsNil() && (wpe.Len()%C != 0 || wpe.Len() < T*C)) {
		panic("cuda: " + op + ": wte/wpe shape does not match C and T")
	}
	return wte.Len() / C
}
