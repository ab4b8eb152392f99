package cpu

import "github.com/gotrain/gotrain/backend"

// MatmulForward implements backend.Backend: out = inp·weightᵀ + bias as one
// GEMM. The bias is written into out first (in parallel) and the GEMM
// accumulates onto it with beta=1, which costs one pass over out instead of a
// GEMM pass plus a bias pass.
func (be *Backend) MatmulForward(out, inp, weight, bias backend.Buffer, N, C, OC int) {
	const op = "MatmulForward"
	checkLen(op, "out", out, N*OC)
	checkLen(op, "inp", inp, N*C)
	checkLen(op, "weight", weight, OC*C)
	ov, iv, wv := floatView(op, out), floatView(op, inp), floatView(op, weight)
	o := be.scratchFor(ov, N*OC)
	beta := float32(0)
	if !bias.IsNil() {
		checkLen(op, "bias", bias, OC)
		bv := floatView(op, bias)
		b := bv.load(0, OC, bv.tmp(OC))
		be.parallel(N, rowGrain(OC), func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				copy(o[r*OC:(r+1)*OC], b)
			}
		})
		beta = 1
	}
	x := be.widen(iv, N*C)
	w := be.widen(wv, OC*C)
	if N > 0 && OC > 0 {
		be.gemm.Sgemm(false, true, N, OC, C, 1, x, max(1, C), w, max(1, C), beta, o, OC)
	}
	be.release(iv, x)
	be.release(wv, w)
	be.narrow(ov, o)
}

// MatmulBackward implements backend.Backend with two GEMMs (dinp = dout·W
// with beta=0, dweight += doutᵀ·inp with beta=1) and a parallel column sum
// for dbias.
func (be *Backend) MatmulBackward(dinp, dweight, dbias, dout, inp, weight backend.Buffer, N, C, OC int) {
	const op = "MatmulBackward"
	checkLen(op, "dout", dout, N*OC)
	checkLen(op, "inp", inp, N*C)
	checkLen(op, "weight", weight, OC*C)
	checkLen(op, "dweight", dweight, OC*C)
	dov := floatView(op, dout)
	d := be.widen(dov, N*OC)
	defer be.release(dov, d)

	if !dbias.IsNil() {
		checkLen(op, "dbias", dbias, OC)
		bv := floatView(op, dbias)
		be.parallel(OC, max(1, (1<<14)/max(1, N)), func(_, lo, hi int) {
			acc := bv.load(lo, hi-lo, bv.tmp(hi-lo))
			for r := 0; r < N; r++ {
				row := d[r*OC+lo : r*OC+hi]
				row = row[:len(acc)]
				for j := range acc {
					acc[j] += row[j]
				}
			}
			bv.store(lo, acc)
		})
	}
	if !dinp.IsNil() {
		checkLen(op, "dinp", dinp, N*C)
		div, wv := floatView(op, dinp), floatView(op, weight)
		w := be.widen(wv, OC*C)
		di := be.scratchFor(div, N*C)
		if N > 0 && C > 0 {
			be.gemm.Sgemm(false, false, N, C, OC, 1, d, max(1, OC), w, max(1, C), 0, di, max(1, C))
		}
		be.release(wv, w)
		be.narrow(div, di)
	}
	dwv, iv := floatView(op, dweight), floatView(op, inp)
	dw := be.widen(dwv, OC*C)
	x := be.widen(iv, N*C)
	if OC > 0 && C > 0 {
		be.gemm.Sgemm(true, false, OC, C, N, 1, d, max(1, OC), x, max(1, C), 1, dw, max(1, C))
	}
	be.release(iv, x)
	be.narrow(dwv, dw)
}
