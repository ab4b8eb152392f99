package cuda

import "github.com/gotrain/gotrain/backend"

// Add implements backend.Backend. out may alias a or b: each element is
// read and written by the same thread.
func (b *Backend) Add(out, x, y backend.Buffer, N int) {
	const op = "add"
	if b.hostOp(op, out, x, y) {
		b.host.Add(out, x, y, N)
		return
	}
	needLen(op, "out", out, N)
	needLen(op, "a", x, N)
	needLen(op, "b", y, N)
	b.check(op, b.k.Add(b.stream, b.t(op, out), b.t(op, x), b.t(op, y), N))
}

// Scale implements backend.Backend.
func (b *Backend) Scale(x backend.Buffer, s float32) {
	const op = "scale"
	if b.hostOp(op, x) {
		b.host.Scale(x, s)
		return
	}
	b.check(op, b.k.Scale(b.stream, b.t(op, x), s, x.Len()))
}

// Dropout implements backend.Dropouter with one element-wise kernel whose
// mask is the CPU backend's bit for bit.
func (b *Backend) Dropout(out, inp backend.Buffer, p float32, seed uint64, N int) {
	const op = "dropout"
	if !(p >= 0 && p < 1) {
		panic("cuda: dropout: p outside [0, 1)")
	}
	if b.hostOp(op, out, inp) {
		if h, ok := b.host.(backend.Dropouter); ok {
			h.Dropout(out, inp, p, seed, N)
			return
		}
		panic("cuda: dropout: the host backend has no Dropout")
	}
	needLen(op, "out", out, N)
	needLen(op, "inp", inp, N)
	b.check(op, b.k.Dropout(b.stream, b.t(op, out), b.t(op, inp), N, seed, backend.DropoutThreshold(p), backend.DropoutScale(p)))
}

// needLen panics unless x holds exactly n elements: a length mismatch
// between the model and the backend is a bug in the caller.
func needLen(op, name string, x backend.Buffer, n int) {
	if x.Len() != n {
		panic("cuda: " + op + ": " + name + " has the wrong length")
	}
}
