package cpu

import "github.com/gotrain/gotrain/backend"

// checkRotary panics on a shape the rotary ops cannot run: an odd head size,
// one norm without the other, or rstd given without the norms (or the
// reverse). It returns whether the norms are given.
func checkRotary(op string, rstd, qnorm, knorm, cos, sin, qkv backend.Buffer, B, T, NH, KV, HD int) bool {
	if HD%2 != 0 {
		panic("cpu: " + op + ": head size HD must be even")
	}
	norms := !qnorm.IsNil()
	if knorm.IsNil() == norms {
		panic("cpu: " + op + ": qnorm and knorm must be given together")
	}
	if rstd.IsNil() == norms {
		panic("cpu: " + op + ": rstd must be given exactly when the norms are")
	}
	checkLen(op, "qkv", qkv, B*T*(NH+2*KV)*HD)
	checkLen(op, "cos", cos, T*HD/2)
	checkLen(op, "sin", sin, T*HD/2)
	if norms {
		checkLen(op, "qnorm", qnorm, HD)
		checkLen(op, "knorm", knorm, HD)
		checkLen(op, "rstd", rstd, B*T*(NH+KV))
	}
	return norms
}

// QKVRotaryForward implements backend.DecoderOps, in parallel over tokens:
// each token's row of qkv is read once and its query and key heads are
// normalised (with the norms) and rotated head by head while the row is in
// L1, so the op is one pass over memory. Without norms out may alias qkv (each pair is
// read before it is written).
func (be *Backend) QKVRotaryForward(out, rstd, qkv, qnorm, knorm, cos, sin backend.Buffer, B, T, NH, KV, HD int, eps float32) {
	const op = "QKVRotaryForward"
	norms := checkRotary(op, rstd, qnorm, knorm, cos, sin, qkv, B, T, NH, KV, HD)
	W := (NH + 2*KV) * HD
	checkLen(op, "out", out, B*T*W)
	h := HD / 2
	cv, sv := f32s(op, cos), f32s(op, sin)
	ov, qv := floatView(op, out), floatView(op, qkv)
	var rv []float32
	var qnv, knv fview
	if norms {
		rv = f32s(op, rstd)
		qnv, knv = floatView(op, qnorm), floatView(op, knorm)
	}
	be.parallel(B*T, rowGrain(W), func(_, lo, hi int) {
		otmp, xtmp := ov.tmp(W), qv.tmp(W)
		var qw, kw, y []float32
		if norms {
			qw, kw = qnv.vload(0, HD, qnv.tmp(HD)), knv.vload(0, HD, knv.tmp(HD))
			y = make([]float32, HD)
		}
		for tok := lo; tok < hi; tok++ {
			t := tok % T
			c, s := cv[t*h:(t+1)*h], sv[t*h:(t+1)*h]
			x := qv.vload(tok*W, W, xtmp)
			o := ov.out(tok*W, W, otmp)
			for hd := 0; hd < NH+KV; hd++ {
				xh, oh := x[hd*HD:(hd+1)*HD], o[hd*HD:(hd+1)*HD]
				if norms {
					w := qw
					if hd >= NH {
						w = kw
					}
					r := rmsRstd(xh, eps)
					scaleMul(y, xh, w, r)
					rv[tok*(NH+KV)+hd] = r
					xh = y
				}
				rotateHalf(oh, xh, c, s)
			}
			copy(o[(NH+KV)*HD:], x[(NH+KV)*HD:])
			ov.vstore(tok*W, o)
		}
	})
}

// QKVRotaryBackward implements backend.DecoderOps, in parallel over tokens.
// The rotation's transpose is the rotation by −angle; with norms the rotated
// gradient goes through the RMSNorm backward row kernel over each head's HD
// elements, and each chunk sums its own dqnorm and dknorm partials, added in
// chunk order (zero dqnorm and dknorm, frozen norms, leave them unused).
// Without norms dqkv may alias dout.
func (be *Backend) QKVRotaryBackward(dqkv, dqnorm, dknorm, dout, qkv, qnorm, knorm, rstd, cos, sin backend.Buffer, B, T, NH, KV, HD int) {
	const op = "QKVRotaryBackward"
	norms := checkRotary(op, rstd, qnorm, knorm, cos, sin, qkv, B, T, NH, KV, HD)
	if dqnorm.IsNil() != dknorm.IsNil() || (!norms && !dqnorm.IsNil()) {
		panic("cpu: " + op + ": dqnorm and dknorm go together, and only with the norms")
	}
	frozen := dqnorm.IsNil() // norms without gradients: frozen weights
	W := (NH + 2*KV) * HD
	checkLen(op, "dqkv", dqkv, B*T*W)
	checkLen(op, "dout", dout, B*T*W)
	h := HD / 2
	cv, sv := f32s(op, cos), f32s(op, sin)
	dv, dov := floatView(op, dqkv), floatView(op, dout)
	var rv []float32
	var qv, qnv, knv, dqv, dkv fview
	var k int
	var partial []float32 // chunk w: dqnorm at [2w·HD, 2w·HD+HD), dknorm after
	if norms {
		rv = f32s(op, rstd)
		qv, qnv, knv = floatView(op, qkv), floatView(op, qnorm), floatView(op, knorm)
		if !frozen {
			checkLen(op, "dqnorm", dqnorm, HD)
			checkLen(op, "dknorm", dknorm, HD)
			dqv, dkv = floatView(op, dqnorm), floatView(op, dknorm)
		}
		k = be.chunks(B*T, rowGrain(W))
		partial = make([]float32, 2*k*HD)
	}
	be.parallel(B*T, rowGrain(W), func(wk, lo, hi int) {
		otmp, dtmp := dv.tmp(W), dov.tmp(W)
		var xtmp, qw, kw, dy, pq, pk []float32
		if norms {
			xtmp = qv.tmp(W)
			qw, kw = qnv.vload(0, HD, qnv.tmp(HD)), knv.vload(0, HD, knv.tmp(HD))
			dy = make([]float32, HD)
			pq, pk = partial[2*wk*HD:2*wk*HD+HD], partial[2*wk*HD+HD:2*wk*HD+2*HD]
		}
		for tok := lo; tok < hi; tok++ {
			t := tok % T
			c, s := cv[t*h:(t+1)*h], sv[t*h:(t+1)*h]
			d := dov.vload(tok*W, W, dtmp)
			var x []float32
			if norms {
				x = qv.vload(tok*W, W, xtmp)
			}
			o := dv.out(tok*W, W, otmp)
			for hd := 0; hd < NH+KV; hd++ {
				dh, oh := d[hd*HD:(hd+1)*HD], o[hd*HD:(hd+1)*HD]
				if !norms {
					unrotateHalf(oh, dh, c, s)
					continue
				}
				unrotateHalf(dy, dh, c, s)
				w, pw := qw, pq
				if hd >= NH {
					w, pw = kw, pk
				}
				rmsNormBackwardRow(oh, pw, x[hd*HD:(hd+1)*HD], dy, w, rv[tok*(NH+KV)+hd])
			}
			copy(o[(NH+KV)*HD:], d[(NH+KV)*HD:])
			dv.vstore(tok*W, o)
		}
	})
	if norms && !frozen {
		addPartials(dqv, partial, k, HD, 0)
		addPartials(dkv, partial, k, HD, HD)
	}
}

// rotateHalfScalar sets pairs [j0, h) of o to x rotated by the angles
// whose cosines and sines are c and s (h = len(c), len(x) = 2h), in
// transformers' rotate_half convention: o[j] = x[j]·c[j] − x[j+h]·s[j],
// o[j+h] = x[j+h]·c[j] + x[j]·s[j]. o may be x.
func rotateHalfScalar(o, x, c, s []float32, j0 int) {
	h := len(c)
	s = s[:h]
	lo, hi := x[:h], x[h:2*h]
	olo, ohi := o[:h], o[h:2*h]
	for j := j0; j < h; j++ {
		a, b := lo[j], hi[j]
		olo[j] = a*c[j] - b*s[j]
		ohi[j] = b*c[j] + a*s[j]
	}
}

// unrotateHalfScalar is rotateHalfScalar's transpose (the rotation by
// −angle) on pairs [j0, h). o may be x.
func unrotateHalfScalar(o, x, c, s []float32, j0 int) {
	h := len(c)
	s = s[:h]
	lo, hi := x[:h], x[h:2*h]
	olo, ohi := o[:h], o[h:2*h]
	for j := j0; j < h; j++ {
		a, b := lo[j], hi[j]
		olo[j] = a*c[j] + b*s[j]
		ohi[j] = b*c[j] - a*s[j]
	}
}
