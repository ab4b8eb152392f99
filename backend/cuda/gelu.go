package cuda

import "github.com/gotrain/gotrain/backend"

// GeluForward implements backend.Backend. out may alias inp.
func (b *Backend) GeluForward(out, inp backend.Buffer, N int) {
	const op = "gelu forward"
	if b.hostOp(op, out, inp) {
		b.host.GeluForward(out, inp, N)
		return
	}
	needLen(op, "out", out, N)
	needLen(op, "inp", inp, N)
	b.check(op, b.k.GeluForward(b.stream, b.t(op, out), b.t(op, inp), N))
}

// GeluBackward implements backend.Backend. dinp may alias dout.
func (b *Backend) GeluBackward(dinp, inp, dout backend.Buffer, N int) {
	const op = "gelu backward"
	if b.hostOp(op, dinp, inp, dout) {
		b.host.GeluBackward(dinp, inp, dout, N)
		return
	}
	needLen(op, "dinp", dinp, N)
	needLen(op, "inp", inp, N)
	needLen(op, "dout", dout, N)
	b.check(op, b.k.GeluBackward(b.stream, b.t(op, dinp), b.t(op, inp), b.t(op, dout), N))
}
