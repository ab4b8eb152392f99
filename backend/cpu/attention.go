package cpu

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gotrain/gotrain/backend"
)

// Attention is FlashAttention-2's algorithm (Dao, 2023) on tiles small
// enough for the cache, with GEMMs on strided views of qkv for the tile
// products. No (T,T) matrix exists: forward walks each query tile's key
// tiles up to the causal limit with an online softmax and keeps only out
// and the log-sum-exp of each row; backward recomputes the probabilities
// of one tile at a time from lse. The workspace is a few tiles per worker,
// whatever T is.
//
// Tiles are at most attTile queries by attTile keys, and smaller for wide
// heads: every tile GEMM (rows × cols × HD multiply-adds) stays within
// attTileMACs, which keeps a tile's operands in L2 and is below the size at
// which a threaded native BLAS (OpenBLAS: m·n·k ≤ 64³) hands a GEMM to its
// thread pool. Attention runs its own workers, one tile GEMM each on the
// calling thread; GEMMs big enough to be threaded make the workers queue
// for the one pool (64×256 tiles: forward at B8 T256 NH4 HD64 took 90 ms
// against 8 with 64×64, on two cores with OpenBLAS).
const (
	attTile     = 64
	attMinTile  = 16
	attTileMACs = 64 * 64 * 64
)

// attDims are one attention call's dimensions and the strides derived from
// them.
type attDims struct {
	B, T, NH, KV, HD int
	G                int // NH/KV: query heads per key/value head
	S                int // qkv row stride, (NH+2·KV)·HD
	CO               int // out row stride, NH·HD
	rows, cols       int // tile size: queries × keys
	scale            float32
}

func attentionDims(op string, B, T, NH, KV, HD int) attDims {
	if B < 0 || T < 0 || NH <= 0 || KV <= 0 || HD <= 0 || NH%KV != 0 {
		panic("cpu: " + op + ": want B, T ≥ 0, positive NH, KV and HD, and NH a multiple of KV")
	}
	rows, cols := attTile, attTile
	for rows*cols*HD > attTileMACs && cols > attMinTile {
		if rows > attMinTile {
			rows /= 2
		} else {
			cols /= 2
		}
	}
	return attDims{B: B, T: T, NH: NH, KV: KV, HD: HD, G: NH / KV, S: (NH + 2*KV) * HD, CO: NH * HD,
		rows: rows, cols: cols, scale: float32(1 / math.Sqrt(float64(HD)))}
}

// AttentionForward implements backend.Backend.
func (be *Backend) AttentionForward(out, lse, qkv backend.Buffer, B, T, NH, KV, HD int) {
	const op = "AttentionForward"
	d := attentionDims(op, B, T, NH, KV, HD)
	checkLen(op, "out", out, B*T*d.CO)
	checkLen(op, "lse", lse, B*NH*T)
	checkLen(op, "qkv", qkv, B*T*d.S)
	l := f32s(op, lse)
	ov, qv := floatView(op, out), floatView(op, qkv)
	x := be.widen(qv, B*T*d.S)
	o := be.scratchFor(ov, B*T*d.CO)
	be.attFwd(o, l, x, d)
	be.release(qv, x)
	be.narrow(ov, o)
}

// AttentionBackward implements backend.Backend.
func (be *Backend) AttentionBackward(dqkv, dout, out, qkv, lse backend.Buffer, B, T, NH, KV, HD int) {
	const op = "AttentionBackward"
	d := attentionDims(op, B, T, NH, KV, HD)
	checkLen(op, "dqkv", dqkv, B*T*d.S)
	checkLen(op, "dout", dout, B*T*d.CO)
	checkLen(op, "out", out, B*T*d.CO)
	checkLen(op, "qkv", qkv, B*T*d.S)
	checkLen(op, "lse", lse, B*NH*T)
	l := f32s(op, lse)
	dqv, dov, ov, qv := floatView(op, dqkv), floatView(op, dout), floatView(op, out), floatView(op, qkv)
	x := be.widen(qv, B*T*d.S)
	do := be.widen(dov, B*T*d.CO)
	o := be.widen(ov, B*T*d.CO)
	dq := be.scratchFor(dqv, B*T*d.S)
	be.attBwd(dq, do, o, x, l, d)
	be.release(qv, x)
	be.release(dov, do)
	be.release(ov, o)
	be.narrow(dqv, dq)
}

// attRun calls fn(w, u) once for every unit u in [0, n) on up to k workers,
// w being the worker's index in [0, k). Workers take units from a shared
// counter, so faster ones take more; a unit's result must not depend on
// which worker runs it, only its scratch (indexed by w) does.
func attRun(k, n int, fn func(w, u int)) {
	k = min(k, n)
	if k <= 1 {
		for u := range n {
			fn(0, u)
		}
		return
	}
	var next atomic.Int64
	work := func(w int) {
		for u := int(next.Add(1) - 1); u < n; u = int(next.Add(1) - 1) {
			fn(w, u)
		}
	}
	var wg sync.WaitGroup
	wg.Add(k - 1)
	for w := 1; w < k; w++ {
		go func() {
			defer wg.Done()
			work(w)
		}()
	}
	work(0)
	wg.Wait()
}

// attFwd computes o (B,T,NH·HD) and lse (B,NH,T) from x = qkv, fp32. A unit
// is one query tile of one (b, h); units are numbered longest first (the
// last tile of every head, then the one before, …) so the shared counter
// balances the causal triangle's uneven tiles.
func (be *Backend) attFwd(o, lse, x []float32, d attDims) {
	R, Cc := d.rows, d.cols
	tiles := (d.T + R - 1) / R
	heads := d.B * d.NH
	k := min(be.threads, heads*tiles)
	per := R*Cc + Cc*d.HD + R*d.HD + 2*R + 4*attAlign
	ws := be.attScratch.get(max(k, 1) * per)
	defer be.attScratch.put(ws)
	attRun(k, heads*tiles, func(w, u int) {
		bh, tile := u%heads, tiles-1-u/heads
		s := ws[w*per : (w+1)*per]
		t := attFwdScratch{sc: attCarve(&s, R*Cc), kt: attCarve(&s, Cc*d.HD), acc: attCarve(&s, R*d.HD), ml: attCarve(&s, 2*R)}
		be.attFwdTile(o, lse, x, d, bh/d.NH, bh%d.NH, tile*R, min(d.T, (tile+1)*R), t)
	})
}

// attCarve returns n elements from the front of *s, starting on a 64-byte
// boundary so that a tile row's vector loads do not straddle cache lines,
// and advances *s past them; callers reserve attAlign extra elements per
// carve.
func attCarve(s *[]float32, n int) []float32 {
	skip := int(-(uintptr(unsafe.Pointer(unsafe.SliceData(*s))) / 4) & (attAlign - 1))
	x := (*s)[skip : skip+n : skip+n]
	*s = (*s)[skip+n:]
	return x
}

// attAlign is a cache line in float32s.
const attAlign = 16

// attTranspose sets dst (cols × rows, row stride rows) to the transpose of
// the rows × cols matrix at src (row stride ld). The tile GEMMs then
// multiply by Kᵀ and Vᵀ as plain row-major operands: gonum's GEMM runs that
// 2.2× faster than a transposed operand (measured on the tile shapes); a
// native BLAS does not mind either way, and the copy is 1/rows of the
// GEMM's work.
func attTranspose(dst, src []float32, rows, cols, ld int) {
	for i := range rows {
		row := src[i*ld:][:cols]
		for j, v := range row {
			dst[j*rows+i] = v
		}
	}
}

// attFwdScratch is one worker's forward tiles: scores sc (rows × cols),
// the key tile transposed kt (HD × cols), the output accumulator acc
// (rows × HD) and the running max and sum ml (2·rows).
type attFwdScratch struct{ sc, kt, acc, ml []float32 }

// attFwdTile computes query rows [r0, r1) of head h of batch row b: for
// each key tile, scores = scale·Q·Kᵀ into sc, then per row the running max
// m and sum l are updated, the accumulator acc rescaled by e^(m_old−m_new)
// and P = e^(scores−m) added as acc += P·V. Finally out = acc/l and
// lse = m + log l.
func (be *Backend) attFwdTile(o, lse, x []float32, d attDims, b, h, r0, r1 int, t attFwdScratch) {
	sc, acc, ml := t.sc, t.acc, t.ml
	S, HD, g := d.S, d.HD, h/d.G
	q := x[b*d.T*S+h*HD:]
	k := x[b*d.T*S+(d.NH+g)*HD:]
	v := x[b*d.T*S+(d.NH+d.KV+g)*HD:]
	br := r1 - r0
	m, l := ml[:br], ml[br:2*br]
	for i := range m {
		m[i] = float32(math.Inf(-1))
	}
	clear(l)
	for c0 := 0; c0 < r1; c0 += d.cols {
		c1 := min(c0+d.cols, r1)
		bc := c1 - c0
		attTranspose(t.kt, k[c0*S:], bc, HD, S)
		be.attMul(false, br, bc, HD, d.scale, q[r0*S:], S, t.kt, bc, 0, sc, bc)
		for i := range br {
			row := sc[i*bc : (i+1)*bc]
			n := min(bc, r0+i+1-c0) // keys c0 … r0+i are visible to query r0+i
			if n <= 0 {
				clear(row)
				continue
			}
			live := row[:n]
			mNew := max(m[i], attRowMax(live))
			sum := attExpShiftSum(live, mNew)
			clear(row[n:])
			if c0 > 0 {
				alpha := exp32(m[i] - mNew)
				attScale(acc[i*HD:(i+1)*HD], alpha)
				l[i] = l[i]*alpha + sum
			} else {
				l[i] = sum
			}
			m[i] = mNew
		}
		beta := float32(1)
		if c0 == 0 {
			beta = 0
		}
		be.attMul(false, br, HD, bc, 1, sc, bc, v[c0*S:], S, beta, acc, HD)
	}
	for i := range br {
		t := r0 + i
		attScaleTo(o[(b*d.T+t)*d.CO+h*HD:][:HD], acc[i*HD:(i+1)*HD], 1/l[i])
		lse[(b*d.NH+h)*d.T+t] = m[i] + float32(math.Log(float64(l[i])))
	}
}

// attBwd computes dq = dqkv (B,T,(NH+2·KV)·HD) from do = dout, o = out,
// x = qkv and lse, fp32. A unit owns one key/value head g of one batch row
// b, or a part of its key tiles: it accumulates that head's dK and dV
// tile by tile over the NH/KV query heads that share it, so no two units
// write the same gradient. dQ of a query row collects a term from every key
// tile; with one part per (b, g) the unit adds them into dq itself. When
// B·KV is below the worker count, each (b, g) is split into parts of
// roughly equal work so every worker has one; parts after the first add
// their dQ terms into zeroed partial buffers (O(T) per head), summed into
// dq afterwards in part order, so the result depends only on the worker
// count, never on scheduling.
func (be *Backend) attBwd(dq, do, o, x, lse []float32, d attDims) {
	kvHeads := d.B * d.KV
	R, Cc := d.rows, d.cols
	keyTiles := (d.T + Cc - 1) / Cc
	parts := 1
	if kvHeads > 0 && kvHeads < be.threads {
		parts = min(keyTiles, (be.threads+kvHeads-1)/kvHeads)
	}
	bounds := attBwdParts(d.T, Cc, keyTiles, parts)
	parts = len(bounds) - 1
	units := kvHeads * parts
	k := min(be.threads, units)
	per := 2*R*Cc + 4*Cc*d.HD + R + 7*attAlign
	// A partial holds a (b, g)'s dQ: (T, G·HD), one per part after the first.
	part := d.T * d.G * d.HD
	ws := be.attScratch.get(max(k, 1)*per + kvHeads*(parts-1)*part)
	defer be.attScratch.put(ws)
	partials := ws[max(k, 1)*per:]
	attRun(k, units, func(w, u int) {
		bg, p := u/parts, u%parts
		b, g := bg/d.KV, bg%d.KV
		s := ws[w*per : (w+1)*per]
		t := attBwdScratch{p: attCarve(&s, R*Cc), ds: attCarve(&s, R*Cc), kt: attCarve(&s, Cc*d.HD), vt: attCarve(&s, Cc*d.HD),
			dk: attCarve(&s, Cc*d.HD), dv: attCarve(&s, Cc*d.HD), dd: attCarve(&s, R)}
		// dQ rows of the group's heads: the query third of dqkv for part 0
		// (row stride S, head h at h·HD), a partial for the others (row
		// stride G·HD, the group's i-th head at i·HD).
		var dQ []float32
		var ld, off int
		if p == 0 {
			dQ, ld, off = dq[b*d.T*d.S:], d.S, g*d.G*d.HD
			for t := range d.T {
				clear(dQ[t*ld+off:][:d.G*d.HD])
			}
		} else {
			dQ, ld = partials[(bg*(parts-1)+p-1)*part:][:part], d.G*d.HD
			clear(dQ)
		}
		for c0 := bounds[p]; c0 < bounds[p+1]; c0 += Cc {
			be.attBwdKeyTile(dq, dQ[off:], ld, do, o, x, lse, d, b, g, c0, min(c0+Cc, d.T), t)
		}
	})
	if parts > 1 {
		rows := kvHeads * d.T
		be.parallel(rows, max(1, 4096/(d.G*d.HD)), func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				bg, t := r/d.T, r%d.T
				b, g := bg/d.KV, bg%d.KV
				dst := dq[(b*d.T+t)*d.S+g*d.G*d.HD:][:d.G*d.HD]
				for p := 1; p < parts; p++ {
					attAdd(dst, partials[(bg*(parts-1)+p-1)*part+t*d.G*d.HD:][:d.G*d.HD])
				}
			}
		})
	}
}

// attBwdParts splits key tiles [0, keyTiles) into at most parts contiguous
// ranges of about equal work and returns their starting columns followed
// by T. Key tile j is seen by the T − c0 queries from its first column c0
// on, so early tiles weigh more.
func attBwdParts(T, cols, keyTiles, parts int) []int {
	bounds := []int{0}
	total := 0
	for j := range keyTiles {
		total += T - j*cols
	}
	done := 0
	for j := range keyTiles {
		done += T - j*cols
		if len(bounds) < parts && j+1 < keyTiles && done*parts >= total*len(bounds) {
			bounds = append(bounds, (j+1)*cols)
		}
	}
	return append(bounds, T)
}

// attBwdScratch is one worker's backward tiles: probabilities p and score
// gradients ds (rows × cols), the key tile's keys and values transposed (kt,
// vt: HD × cols), its dK and dV accumulators (cols × HD) and D for a query
// tile (rows).
type attBwdScratch struct{ p, ds, kt, vt, dk, dv, dd []float32 }

// attBwdKeyTile accumulates everything key columns [c0, c1) of key/value
// head g (batch row b) contribute: their dK and dV, summed over the group's
// query heads h and every query tile from row c0 on, and the dQ terms of
// those query rows, added into dQ (row stride ld, the group's i-th head at
// i·HD). Per tile pair, with P = e^(scale·Q·Kᵀ − lse) (0 above the
// diagonal) and D = rowsum(dO∘O):
// dV += Pᵀ·dO, dP = dO·Vᵀ, dS = P∘(dP − D), dQ += scale·dS·K,
// dK += scale·dSᵀ·Q.
func (be *Backend) attBwdKeyTile(dqkv, dQ []float32, ld int, do, o, x, lse []float32, d attDims, b, g, c0, c1 int, t attBwdScratch) {
	S, HD, bc := d.S, d.HD, c1-c0
	base := b * d.T * S
	k := x[base+(d.NH+g)*HD:]
	v := x[base+(d.NH+d.KV+g)*HD:]
	dk, dv := t.dk[:bc*HD], t.dv[:bc*HD]
	clear(dk)
	clear(dv)
	kt, vt := t.kt[:HD*bc], t.vt[:HD*bc]
	attTranspose(kt, k[c0*S:], bc, HD, S)
	attTranspose(vt, v[c0*S:], bc, HD, S)
	for i := range d.G {
		h := g*d.G + i
		q := x[base+h*HD:]
		dO := do[b*d.T*d.CO+h*HD:]
		oh := o[b*d.T*d.CO+h*HD:]
		lh := lse[(b*d.NH+h)*d.T:]
		for r0 := c0; r0 < d.T; r0 += d.rows {
			r1 := min(r0+d.rows, d.T)
			br := r1 - r0
			p, ds, dd := t.p[:br*bc], t.ds[:br*bc], t.dd[:br]
			be.attMul(false, br, bc, HD, d.scale, q[r0*S:], S, kt, bc, 0, p, bc)
			for j := range br {
				row := p[j*bc : (j+1)*bc]
				n := min(bc, r0+j+1-c0)
				attExpShift(row[:n], lh[r0+j])
				clear(row[n:])
				dd[j] = attDot(dO[(r0+j)*d.CO:][:HD], oh[(r0+j)*d.CO:][:HD])
			}
			be.attMul(true, bc, HD, br, 1, p, bc, dO[r0*d.CO:], d.CO, 1, dv, HD)
			be.attMul(false, br, bc, HD, 1, dO[r0*d.CO:], d.CO, vt, bc, 0, ds, bc)
			for j := range br {
				attDS(ds[j*bc:(j+1)*bc], p[j*bc:(j+1)*bc], dd[j])
			}
			be.attMul(false, br, HD, bc, d.scale, ds, bc, k[c0*S:], S, 1, dQ[r0*ld+i*HD:], ld)
			be.attMul(true, bc, HD, br, d.scale, ds, bc, q[r0*S:], S, 1, dk, HD)
		}
	}
	for j := range bc {
		copy(dqkv[base+(c0+j)*S+(d.NH+g)*HD:][:HD], dk[j*HD:(j+1)*HD])
		copy(dqkv[base+(c0+j)*S+(d.NH+d.KV+g)*HD:][:HD], dv[j*HD:(j+1)*HD])
	}
}
