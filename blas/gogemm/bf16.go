package gogemm

import "math"

// bf16 GEMM: A and B hold bfloat16 values (the upper 16 bits of a float32,
// as raw uint16), C is fp32 and every product is accumulated in fp32.
//
// Where the CPU has AVX512_BF16, A and B are packed as bf16 pairs along k
// and a VDPBF16PS kernel multiplies both elements of a pair and adds them
// to an fp32 accumulator in one instruction: twice the multiply-adds of
// VFMADD231PS per instruction, from half the packed bytes. Elsewhere the
// operands are widened to fp32 while packing (a shift) and the fp32 kernel
// runs: the same FLOP rate as Sgemm, from half the input bytes.

// bf16Kernel is a pair micro-kernel and its tile: fn computes the mr×nr
// tile C = alpha·Σₚ Σₜ a[(p·mr+i)·2+t]·b[(p·nr+j)·2+t] + beta·C for kp
// pair steps over packed panels a (2·mr·kp values) and b (2·nr·kp), C
// row-major with leading dimension ldc. With beta = 0, C is not read.
type bf16Kernel struct {
	name   string
	mr, nr int
	fn     func(kp int, a, b []uint16, c []float32, ldc int, alpha, beta float32)
}

// bf16 widens a bfloat16 exactly.
func bf16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// genericBF16Kernel is the portable pair kernel. It is slower than
// widening into the fp32 kernel and runs only in tests, where it checks the
// pair packing on any CPU.
func genericBF16Kernel() *bf16Kernel {
	return &bf16Kernel{name: "generic bf16 4×16", mr: genericMR, nr: genericNR, fn: kernelBF16Generic}
}

func kernelBF16Generic(kp int, a, b []uint16, c []float32, ldc int, alpha, beta float32) {
	var acc [genericMR][genericNR]float32
	a = a[:kp*2*genericMR]
	b = b[:kp*2*genericNR]
	for p := range kp {
		bp := (*[2 * genericNR]uint16)(b[p*2*genericNR:])
		ap := (*[2 * genericMR]uint16)(a[p*2*genericMR:])
		for i := range genericMR {
			x0, x1 := bf16(ap[2*i]), bf16(ap[2*i+1])
			row := &acc[i]
			for j := range genericNR {
				row[j] += x0*bf16(bp[2*j]) + x1*bf16(bp[2*j+1])
			}
		}
	}
	for i := range genericMR {
		row := c[i*ldc : i*ldc+genericNR]
		for j := range row {
			v := alpha * acc[i][j]
			if beta != 0 {
				v += beta * row[j]
			}
			row[j] = v
		}
	}
}

// BF16Kernel names how Bgemm computes on this CPU: the pair kernel
// ("avx512bf16 12×32") or the fp32 kernel on widened panels ("widen to fp32,
// avx512 12×32").
func (g *Gemm) BF16Kernel() string {
	if g.bkern != nil {
		return g.bkern.name
	}
	return "widen to fp32, " + g.kern.name
}

// NativeBF16 reports whether Bgemm multiplies bf16 directly (a pair kernel)
// rather than widening to fp32 first.
func (g *Gemm) NativeBF16() bool { return g.bkern != nil }

// Bgemm computes C = alpha·op(A)·op(B) + beta·C like Sgemm, with A and B
// bfloat16 (raw bits) and C fp32. Products are exact in fp32 and sums are
// rounded to fp32, so the result equals Sgemm on the widened operands up to
// fp32 rounding of the sums (the pair kernel adds two products before
// rounding and flushes denormals to zero). m, n, k must be positive.
func (g *Gemm) Bgemm(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	p := problem{transA: transA, transB: transB, k: k, alpha: alpha, a16: a, lda: lda, b16: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	if g.bkern == nil {
		g.split(m, n, k, g.kern.mr, g.kern.nr, func(i0, i1, j0, j1 int) { g.run(&p, i0, i1, j0, j1) })
		return
	}
	g.split(m, n, k, g.bkern.mr, g.bkern.nr, func(i0, i1, j0, j1 int) { g.runBF16(&p, i0, i1, j0, j1) })
}

// BgemmRound computes C = bf16(alpha·op(A)·op(B) + bias) with A, B and C
// bfloat16 (raw bits) and bias fp32 of length n (nil: none): Bgemm with
// beta = 1 over C holding the bias in every row, rounded to nearest even
// (NaN kept quiet, subnormals rounded like normals: backend.BF16FromF32),
// without the fp32 C. Each tile is rounded as the kernel finishes it, so a
// product with a wide C (the classifier's logits: 256 × 50304 a chunk)
// writes half the bytes and is not read back to be narrowed. It runs only with the pair
// kernel and a k of one slab (k ≤ 512): it reports false, having written
// nothing, elsewhere. m, n, k must be positive.
func (g *Gemm) BgemmRound(transA, transB bool, m, n, k int, alpha float32, a []uint16, lda int, b []uint16, ldb int, bias []float32, c []uint16, ldc int) bool {
	// roundEdge reads tiles 32 wide: the AVX-512 pair kernel's.
	if g.bkern == nil || g.bkern.nr != 32 || !g.vec || k > 2*g.kc {
		return false
	}
	p := problem{transA: transA, transB: transB, k: k, alpha: alpha, a16: a, lda: lda, b16: b, ldb: ldb, c16: c, bias: bias, ldc: ldc}
	g.split(m, n, k, g.bkern.mr, g.bkern.nr, func(i0, i1, j0, j1 int) { g.runBF16(&p, i0, i1, j0, j1) })
	return true
}

// runBF16 is run for the pair kernel: the same loops over kc slabs, mc
// blocks and mr×nr tiles, on pair-packed bf16 panels.
func (g *Gemm) runBF16(p *problem, i0, i1, j0, j1 int) {
	if i0 >= i1 || j0 >= j1 {
		return
	}
	ws := g.getWorkspace()
	defer g.putWorkspace(ws)
	kern := g.bkern
	mr, nr := kern.mr, kern.nr
	// A kc-deep slab of bf16 takes the bytes of a kc/2-deep fp32 one:
	// twice Sgemm's kc fills the same L1 and L2, and halves the passes
	// over C (read and written once a slab) on deep products such as the
	// classifier's dX (k = V) or a dW over a whole batch (k = B·T).
	kc, mc, nc := 2*g.kc, g.mc, g.nc
	if ws.a16 == nil {
		ws.a16 = make([]uint16, roundUp(mc, mr)*kc)
		ws.b16 = make([]uint16, kc*roundUp(nc, nr))
	}
	var edge [maxMR * maxNR]float32
	for jc := j0; jc < j1; jc += nc {
		ncb := min(nc, j1-jc)
		for pc := 0; pc < p.k; pc += kc {
			kcb := min(kc, p.k-pc)
			kp := (kcb + 1) / 2
			packBPairs(ws.b16, p, pc, kcb, jc, ncb, nr, g.vec)
			beta := p.beta
			if pc > 0 {
				beta = 1
			}
			for ic := i0; ic < i1; ic += mc {
				mcb := min(mc, i1-ic)
				packAPairs(ws.a16, p, ic, mcb, pc, kcb, mr, g.vec)
				for jr := 0; jr < ncb; jr += nr {
					for ir := 0; ir < mcb; ir += mr {
						mrb, nrb := min(mr, mcb-ir), min(nr, ncb-jr)
						ap := ws.a16[ir*2*kp : (ir+mr)*2*kp]
						bp := ws.b16[jr*2*kp : (jr+nr)*2*kp]
						ci := (ic+ir)*p.ldc + jc + jr
						if p.c16 != nil {
							// One slab (BgemmRound): the tile is final.
							kern.fn(kp, ap, bp, edge[:], nr, 1, 0)
							var bias []float32
							if p.bias != nil {
								bias = p.bias[jc+jr : jc+jr+nrb]
							}
							roundEdge(p.c16[ci:], p.ldc, edge[:], bias, p.alpha, mrb, nrb)
							continue
						}
						if mrb == mr && nrb == nr {
							kern.fn(kp, ap, bp, p.c[ci:], p.ldc, p.alpha, beta)
							continue
						}
						kern.fn(kp, ap, bp, edge[:], nr, 1, 0)
						combineEdge(p.c[ci:], p.ldc, edge[:], nr, mrb, nrb, p.alpha, beta)
					}
				}
			}
		}
	}
}

// combineEdge writes the valid mrb×nrb part of a partial tile computed
// into edge (row stride nr) to C.
func combineEdge(c []float32, ldc int, edge []float32, nr, mrb, nrb int, alpha, beta float32) {
	for r := range mrb {
		row := c[r*ldc : r*ldc+nrb]
		e := edge[r*nr : r*nr+nrb]
		for j := range row {
			v := alpha * e[j]
			if beta != 0 {
				v += beta * row[j]
			}
			row[j] = v
		}
	}
}

// packAPairs copies op(A)[ic:ic+mcb, pc:pc+kcb] into dst as row panels of
// mr: panel q holds, for each pair step s, rows ic+q·mr … as the pairs
// (op(A)[i][pc+2s], op(A)[i][pc+2s+1]); rows past mcb and the second half
// of an odd kcb's last pair are zero. vec (mr 12 only) moves whole panels
// and whole pairs with the AVX-512 helpers and leaves the rest to the loops.
func packAPairs(dst []uint16, p *problem, ic, mcb, pc, kcb, mr int, vec bool) {
	vec = vec && mr == 12
	kp := (kcb + 1) / 2
	if mcb%mr != 0 || kcb%2 != 0 {
		clear(dst[:roundUp(mcb, mr)*2*kp])
	}
	if p.transA && vec {
		// Rows pc+2s and pc+2s+1 of A interleave into pair step s of
		// every panel.
		full := mcb / 12 * 12
		for s := 0; s+1 < kcb; s += 2 {
			r0 := p.a16[(pc+s)*p.lda+ic:][:mcb]
			r1 := p.a16[(pc+s+1)*p.lda+ic:][:mcb]
			interleaveRows(dst[s*12:], 2*kp*12, r0, r1, 12, mcb/12, pfRows*p.lda)
			for i := full; i < mcb; i++ {
				d := dst[full*2*kp+s*mr+2*(i-full):]
				d[0], d[1] = r0[i], r1[i]
			}
		}
		if kcb%2 != 0 {
			r0 := p.a16[(pc+kcb-1)*p.lda+ic:][:mcb]
			for i, v := range r0 {
				dst[i/mr*mr*2*kp+(kcb-1)*mr+2*(i%mr)] = v
			}
		}
		return
	}
	if p.transA {
		// op(A)[i][pp] = a[pp·lda + i]: row pp of A holds mcb contiguous
		// values, one run of mr for each panel. Walking A row by row keeps
		// its reads sequential, as packA does.
		for pp := range kcb {
			src := p.a16[(pc+pp)*p.lda+ic:][:mcb]
			base := (pp/2)*2*mr + pp%2
			for q := 0; q < mcb; q += mr {
				rows := min(mr, mcb-q)
				d := dst[q*2*kp+base:]
				for r, v := range src[q : q+rows] {
					d[2*r] = v
				}
			}
		}
		return
	}
	// op(A)[i][pp] = a[i·lda + pp]: a row of A is the pairs in order; a
	// panel is the transpose of mr rows of pairs.
	for q := 0; q < mcb; q += mr {
		rows := min(mr, mcb-q)
		panel := dst[q*2*kp : (q+mr)*2*kp]
		done := 0
		if vec && rows == 12 {
			done = kcb / 32 * 32
			tposePairs(panel, 12, p.a16[(ic+q)*p.lda+pc:], p.lda, 12, kcb/32)
		}
		for r := range rows {
			src := p.a16[(ic+q+r)*p.lda+pc:][:kcb]
			d := panel[2*r:]
			s := done
			for ; s+1 < kcb; s += 2 {
				d[s*mr] = src[s]
				d[s*mr+1] = src[s+1]
			}
			if s < kcb {
				d[s*mr] = src[s]
			}
		}
	}
}

// packBPairs copies op(B)[pc:pc+kcb, jc:jc+ncb] into dst as column panels
// of nr: panel q holds, for each pair step s, columns jc+q·nr … as the
// pairs (op(B)[pc+2s][j], op(B)[pc+2s+1][j]); columns past ncb and the
// second half of an odd kcb's last pair are zero. vec (nr 32 only) is
// packAPairs's.
func packBPairs(dst []uint16, p *problem, pc, kcb, jc, ncb, nr int, vec bool) {
	vec = vec && nr == 32
	kp := (kcb + 1) / 2
	if ncb%nr != 0 || kcb%2 != 0 {
		clear(dst[:roundUp(ncb, nr)*2*kp])
	}
	if !p.transB {
		// op(B)[pp][j] = b[pp·ldb + j]: rows pp and pp+1 of B interleave
		// into one pair step of every panel; walking B two rows at a time
		// keeps its reads sequential.
		for s := 0; s < kcb; s += 2 {
			r0 := p.b16[(pc+s)*p.ldb+jc:][:ncb]
			var r1 []uint16
			if s+1 < kcb {
				r1 = p.b16[(pc+s+1)*p.ldb+jc:][:ncb]
			}
			q := 0
			if vec && r1 != nil {
				q = ncb / 32 * 32
				interleaveRows(dst[s*32:], 2*kp*32, r0, r1, 32, ncb/32, 0)
			}
			for ; q < ncb; q += nr {
				cols := min(nr, ncb-q)
				d := dst[q*2*kp+s*nr:][:2*cols]
				a := r0[q : q+cols]
				if r1 == nil {
					for j, v := range a {
						d[2*j] = v
					}
					continue
				}
				b := r1[q : q+cols]
				for j, v := range a {
					d[2*j] = v
					d[2*j+1] = b[j]
				}
			}
		}
		return
	}
	// op(B)[pp][j] = b[j·ldb + pp]: a row of B is column j's pairs in
	// order, each already adjacent; a panel is the transpose of nr rows of
	// pairs, 16 at a time.
	for q := 0; q < ncb; q += nr {
		cols := min(nr, ncb-q)
		panel := dst[q*2*kp : (q+nr)*2*kp]
		done := 0
		if vec && cols == 32 {
			done = kcb / 32 * 32
			tposePairs(panel, 32, p.b16[(jc+q)*p.ldb+pc:], p.ldb, 16, kcb/32)
			tposePairs(panel[32:], 32, p.b16[(jc+q+16)*p.ldb+pc:], p.ldb, 16, kcb/32)
		}
		for j := range cols {
			src := p.b16[(jc+q+j)*p.ldb+pc:][:kcb]
			d := panel[2*j:]
			s := done
			for ; s+1 < kcb; s += 2 {
				d[s*nr] = src[s]
				d[s*nr+1] = src[s+1]
			}
			if s < kcb {
				d[s*nr] = src[s]
			}
		}
	}
}

// packAWiden is packA for bf16 A: the same panels, widened to fp32.
func packAWiden(dst []float32, p *problem, ic, mcb, pc, kcb, mr int) {
	for q := 0; q < mcb; q += mr {
		rows := min(mr, mcb-q)
		panel := dst[q*kcb : (q+mr)*kcb]
		if rows < mr {
			clear(panel)
		}
		if p.transA {
			for pp := range kcb {
				src := p.a16[(pc+pp)*p.lda+ic+q:][:rows]
				d := panel[pp*mr:][:rows]
				for r, v := range src {
					d[r] = bf16(v)
				}
			}
			continue
		}
		for r := range rows {
			src := p.a16[(ic+q+r)*p.lda+pc:][:kcb]
			for pp, v := range src {
				panel[pp*mr+r] = bf16(v)
			}
		}
	}
}

// packBWiden is packB for bf16 B: the same panels, widened to fp32.
func packBWiden(dst []float32, p *problem, pc, kcb, jc, ncb, nr int) {
	for q := 0; q < ncb; q += nr {
		cols := min(nr, ncb-q)
		panel := dst[q*kcb : (q+nr)*kcb]
		if cols < nr {
			clear(panel)
		}
		if !p.transB {
			for pp := range kcb {
				src := p.b16[(pc+pp)*p.ldb+jc+q:][:cols]
				d := panel[pp*nr:][:cols]
				for j, v := range src {
					d[j] = bf16(v)
				}
			}
			continue
		}
		for j := range cols {
			src := p.b16[(jc+q+j)*p.ldb+pc:][:kcb]
			for pp, v := range src {
				panel[pp*nr+j] = bf16(v)
			}
		}
	}
}
