package cpu

import "github.com/gotrain/gotrain/backend"

// bf16Pair returns the raw bf16 words of x and y when both are BF16 and the
// GEMM multiplies bf16 itself, so a product needs no widened copies.
func (be *Backend) bf16Pair(op string, x, y backend.Buffer) (xs, ys []uint16, ok bool) {
	if be.bgemm == nil || x.DType() != backend.BF16 || y.DType() != backend.BF16 {
		return nil, nil, false
	}
	return u16s(op, x), u16s(op, y), true
}

// MatmulForward implements backend.Backend: out = inp·weightᵀ + bias as one
// GEMM. The bias is written into out first (in parallel) and the GEMM
// accumulates onto it with beta=1, which costs one pass over out instead of a
// GEMM pass plus a bias pass. bf16 inp and weight go to the bf16 GEMM as
// they are.
func (be *Backend) MatmulForward(out, inp, weight, bias backend.Buffer, N, C, OC int) {
	const op = "MatmulForward"
	checkLen(op, "out", out, N*OC)
	checkLen(op, "inp", inp, N*C)
	checkLen(op, "weight", weight, OC*C)
	if be.matmulRounded(out, inp, weight, bias, N, C, OC) {
		return
	}
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
	if x16, w16, ok := be.bf16Pair(op, inp, weight); ok {
		be.bgemm.Bgemm(false, true, N, OC, C, 1, x16, max(1, C), w16, max(1, C), beta, o, max(1, OC))
		be.narrow(ov, o)
		return
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
// for dbias; a zero dweight (a frozen weight) skips its GEMM. bf16 operands
// go to the bf16 GEMM as they are.
func (be *Backend) MatmulBackward(dinp, dweight, dbias, dout, inp, weight backend.Buffer, N, C, OC int) {
	const op = "MatmulBackward"
	checkLen(op, "dout", dout, N*OC)
	checkLen(op, "inp", inp, N*C)
	checkLen(op, "weight", weight, OC*C)
	dov := floatView(op, dout)
	// d is dout in fp32, made only for the fp32 GEMMs.
	var d []float32
	fp32Dout := func() []float32 {
		if d == nil {
			d = be.widen(dov, N*OC)
		}
		return d
	}
	defer func() {
		if d != nil {
			be.release(dov, d)
		}
	}()

	if !dbias.IsNil() {
		checkLen(op, "dbias", dbias, OC)
		bv := floatView(op, dbias)
		var d32 []float32 // dout in fp32 unless it is bf16, read as it is
		if dov.dt != backend.BF16 {
			d32 = fp32Dout()
		}
		be.parallel(OC, max(1, (1<<14)/max(1, N)), func(_, lo, hi int) {
			acc := bv.load(lo, hi-lo, bv.tmp(hi-lo))
			for r := 0; r < N; r++ {
				if d32 == nil {
					row := dov.u16[r*OC+lo : r*OC+hi]
					row = row[:len(acc)]
					for j := range acc {
						acc[j] += backend.F32FromBF16(row[j])
					}
					continue
				}
				row := d32[r*OC+lo : r*OC+hi]
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
		di := be.scratchFor(div, N*C)
		if d16, w16, ok := be.bf16Pair(op, dout, weight); ok {
			be.bgemm.Bgemm(false, false, N, C, OC, 1, d16, max(1, OC), w16, max(1, C), 0, di, max(1, C))
		} else {
			w := be.widen(wv, OC*C)
			if N > 0 && C > 0 {
				be.gemm.Sgemm(false, false, N, C, OC, 1, fp32Dout(), max(1, OC), w, max(1, C), 0, di, max(1, C))
			}
			be.release(wv, w)
		}
		be.narrow(div, di)
	}
	if dweight.IsNil() { // a frozen weight: no gradient, no GEMM
		return
	}
	checkLen(op, "dweight", dweight, OC*C)
	dwv, iv := floatView(op, dweight), floatView(op, inp)
	dw := be.widen(dwv, OC*C)
	if d16, x16, ok := be.bf16Pair(op, dout, inp); ok {
		be.bgemm.Bgemm(true, false, OC, C, N, 1, d16, max(1, OC), x16, max(1, C), 1, dw, max(1, C))
	} else {
		x := be.widen(iv, N*C)
		if OC > 0 && C > 0 {
			be.gemm.Sgemm(true, false, OC, C, N, 1, fp32Dout(), max(1, OC), x, max(1, C), 1, dw, max(1, C))
		}
		be.release(iv, x)
	}
	be.narrow(dwv, dw)
}
