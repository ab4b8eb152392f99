// Package gogemm is gotrain's own single-precision GEMM in Go: packed
// panels, a register-blocked micro-kernel (AVX-512 through simd/archsimd in
// a GOEXPERIMENT=simd build, portable Go otherwise), cache blocking for L1
// and L2, and a split of C over goroutines.
//
// It is the GEMM of the CPU backend when OpenBLAS is absent (and may be
// chosen over it), so it needs no native library and no cgo. The algorithm
// is the one of BLIS and OpenBLAS (Goto, van de Geijn, "Anatomy of
// high-performance matrix multiplication", TOMS 2008): for each KC-deep
// slab of op(B), pack it into NR-wide column panels; for each MC-tall block
// of op(A), pack it into MR-tall row panels; then run the MR×NR kernel over
// every panel pair, which reads only unit-stride packed memory. Packing
// absorbs the transposes, so one kernel serves all four combinations.
//
// All matrices are row-major float32. Argument checking is the caller's
// (package blas): Sgemm assumes m, n, k > 0 and slices long enough.
package gogemm

import (
	"runtime"
	"sync"
)

// Blocking. kc×nr floats of packed B (the micro-panel every kernel call of
// one jr step re-reads) stay in L1 beside the streamed A panel; mc×kc
// floats of packed A (144 KiB) in L2; kc×nc of packed B (2 MiB) in L3.
// Chosen by a sweep on the model's shapes on AMD EPYC (Zen 4: 32 KiB L1D,
// 1 MiB L2): mc 96-384 and nc 512-2048 were within noise of each other,
// kc 128 lost 10-20%.
const (
	kc = 256
	mc = 144 // a multiple of every kernel's mr
	nc = 2048
)

// Gemm is a configured GEMM: how many goroutines a large product is split
// over. The zero value runs on GOMAXPROCS goroutines. It is safe for
// concurrent use. Its packing memory is kept between calls (a free list,
// not a sync.Pool, which a GC would empty) so a training step, after the
// first, allocates nothing and takes no page faults for it.
type Gemm struct {
	threads    int
	kern       kernel
	bkern      *bf16Kernel // Bgemm's pair kernel; nil: widen into kern
	kc, mc, nc int         // blocking: the constants above
	vec        bool        // pack with the AVX-512 helpers (12×32 kernels only)
	mu         sync.Mutex
	free       []*workspace // packing memory of finished calls
}

// New returns a Gemm that splits large products over threads goroutines
// (0: GOMAXPROCS).
func New(threads int) *Gemm {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	g := &Gemm{threads: threads, kern: bestKernel(), bkern: bestBF16Kernel(), kc: kc, mc: mc, nc: nc}
	g.vec = hasVecPack() && g.kern.mr == 12 && g.kern.nr == 32
	return g
}

// NewGeneric is New with the portable kernel whatever the CPU has: tests
// run both kernels in one build.
func NewGeneric(threads int) *Gemm {
	g := New(threads)
	g.kern = genericKernel()
	g.bkern = nil
	g.vec = false
	return g
}

// Threads is the number of goroutines a large product is split over.
func (g *Gemm) Threads() int { return g.threads }

// Kernel names the micro-kernel this build and CPU run: "avx512 MR×NR" or
// "generic MR×NR".
func (g *Gemm) Kernel() string { return g.kern.name }

// workspace is one goroutine's packing memory.
type workspace struct {
	a, b     []float32
	a16, b16 []uint16 // Bgemm's pair panels, made on first use
}

func (g *Gemm) getWorkspace() *workspace {
	g.mu.Lock()
	if n := len(g.free); n > 0 {
		w := g.free[n-1]
		g.free = g.free[:n-1]
		g.mu.Unlock()
		return w
	}
	g.mu.Unlock()
	return &workspace{
		a: make([]float32, roundUp(g.mc, g.kern.mr)*g.kc),
		b: make([]float32, g.kc*roundUp(g.nc, g.kern.nr)),
	}
}

// putWorkspace keeps w for the next call. At most threads+2 are kept:
// attention's workers may call concurrently beside a split product.
func (g *Gemm) putWorkspace(w *workspace) {
	g.mu.Lock()
	if len(g.free) < g.threads+2 {
		g.free = append(g.free, w)
	}
	g.mu.Unlock()
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// pfRows is how many rows ahead the packing of a transposed A prefetches:
// it reads a short run (mc values) of each of kc rows a page or more apart,
// which the hardware prefetcher does not follow (+2-4% on the classifier's
// dW). B's packing reads long runs and prefetches nothing (0: the current
// line, a no-op).
const pfRows = 8

// parallelWork is the multiply-add count below which a product runs on the
// calling goroutine: goroutine start-up and a second set of packing
// buffers cost more than they save on small tiles (attention's are 64³).
const parallelWork = 1 << 21

// Sgemm computes C = alpha·op(A)·op(B) + beta·C (row-major, op(A) m×k,
// op(B) k×n). With beta = 0, C is not read. m, n, k must be positive.
func (g *Gemm) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	p := problem{transA: transA, transB: transB, k: k, alpha: alpha, a: a, lda: lda, b: b, ldb: ldb, beta: beta, c: c, ldc: ldc}
	g.split(m, n, k, g.kern.mr, g.kern.nr, func(i0, i1, j0, j1 int) { g.run(&p, i0, i1, j0, j1) })
}

// split runs body over blocks of the m×n product C: on the calling
// goroutine when the product is small or the Gemm single-threaded, else
// over threads goroutines, each on a block along C's larger side in whole
// mr×nr tiles, so each packs and computes independently and the result
// does not depend on timing.
func (g *Gemm) split(m, n, k, mr, nr int, body func(i0, i1, j0, j1 int)) {
	threads := g.threads
	if threads <= 1 || m*n*k < parallelWork {
		body(0, m, 0, n)
		return
	}
	var wg sync.WaitGroup
	cutsOf := func(size, unit int) []int {
		tiles := (size + unit - 1) / unit
		t := min(threads, tiles)
		cuts := make([]int, t+1)
		for i := range t + 1 {
			cuts[i] = min(size, i*tiles/t*unit)
		}
		cuts[t] = size
		return cuts
	}
	if m >= n {
		cuts := cutsOf(m, mr)
		for i := 1; i < len(cuts)-1; i++ {
			wg.Go(func() { body(cuts[i], cuts[i+1], 0, n) })
		}
		body(cuts[0], cuts[1], 0, n)
	} else {
		cuts := cutsOf(n, nr)
		for i := 1; i < len(cuts)-1; i++ {
			wg.Go(func() { body(0, m, cuts[i], cuts[i+1]) })
		}
		body(0, m, cuts[0], cuts[1])
	}
	wg.Wait()
}

// problem is one Sgemm call's arguments.
type problem struct {
	transA, transB bool
	k              int
	alpha          float32
	a              []float32
	lda            int
	b              []float32
	ldb            int
	// a16, b16: bf16 operands (Bgemm) in place of a and b, widened to
	// fp32 while packing for the fp32 kernel.
	a16, b16 []uint16
	beta     float32
	c        []float32
	ldc      int
	// c16, bias: BgemmRound's bf16 C (in place of c) and its fp32 bias
	// row (nil: none).
	c16  []uint16
	bias []float32
}

// run computes rows [i0, i1) × columns [j0, j1) of C on this goroutine.
func (g *Gemm) run(p *problem, i0, i1, j0, j1 int) {
	if i0 >= i1 || j0 >= j1 {
		return
	}
	ws := g.getWorkspace()
	defer g.putWorkspace(ws)
	kern := &g.kern
	mr, nr := kern.mr, kern.nr
	var edge [maxMR * maxNR]float32
	kc, mc, nc := g.kc, g.mc, g.nc
	for jc := j0; jc < j1; jc += nc {
		ncb := min(nc, j1-jc)
		for pc := 0; pc < p.k; pc += kc {
			kcb := min(kc, p.k-pc)
			packB(ws.b, p, pc, kcb, jc, ncb, nr, g.vec)
			// The first k slab applies beta; later ones accumulate.
			beta := p.beta
			if pc > 0 {
				beta = 1
			}
			for ic := i0; ic < i1; ic += mc {
				mcb := min(mc, i1-ic)
				packA(ws.a, p, ic, mcb, pc, kcb, mr, g.vec)
				tile := func(ir, jr int) {
					mrb, nrb := min(mr, mcb-ir), min(nr, ncb-jr)
					ap := ws.a[ir*kcb : (ir+mr)*kcb]
					bp := ws.b[jr*kcb : (jr+nr)*kcb]
					ci := (ic+ir)*p.ldc + jc + jr
					if mrb == mr && nrb == nr {
						kern.fn(kcb, ap, bp, p.c[ci:], p.ldc, p.alpha, beta)
						return
					}
					// A partial tile: compute the whole tile into edge,
					// then combine the valid part with C.
					kern.fn(kcb, ap, bp, edge[:], nr, 1, 0)
					for r := range mrb {
						row := p.c[ci+r*p.ldc : ci+r*p.ldc+nrb]
						e := edge[r*nr : r*nr+nrb]
						for j := range row {
							v := p.alpha * e[j]
							if beta != 0 {
								v += beta * row[j]
							}
							row[j] = v
						}
					}
				}
				// Each B micro-panel (kc×nr) is reused from L1 by every A
				// micro-panel of the block, streamed from L2.
				for jr := 0; jr < ncb; jr += nr {
					for ir := 0; ir < mcb; ir += mr {
						tile(ir, jr)
					}
				}
			}
		}
	}
}

// packA copies op(A)[ic:ic+mcb, pc:pc+kcb] into dst as row panels of mr:
// panel q holds rows ic+q·mr … for each p in order, mr floats per p, rows
// past mcb zero. vec (mr 12 only) moves whole panels with the AVX-512
// helpers and leaves the rest to the loops.
func packA(dst []float32, p *problem, ic, mcb, pc, kcb, mr int, vec bool) {
	vec = vec && mr == 12
	if p.a16 != nil {
		packAWiden(dst, p, ic, mcb, pc, kcb, mr)
		return
	}
	if p.transA {
		// op(A)[i][pp] = a[pp·lda + i]: row pp of A holds mcb contiguous
		// values, one run of mr for each panel. Walking A row by row keeps
		// its reads sequential (a panel-by-panel walk strides by lda every
		// mr values, a TLB miss a step on wide matrices).
		for pp := range kcb {
			src := p.a[(pc+pp)*p.lda+ic:][:mcb]
			q := 0
			if vec {
				q = mcb / 12 * 12
				copyRuns(dst[pp*12:], 12*kcb, src, 12, mcb/12, pfRows*p.lda)
			}
			if mr == 12 {
				for ; q+12 <= mcb; q += 12 {
					*(*[12]float32)(dst[q*kcb+pp*12:]) = *(*[12]float32)(src[q:])
				}
			}
			for ; q < mcb; q += mr {
				rows := min(mr, mcb-q)
				d := dst[q*kcb+pp*mr:][:mr]
				copy(d, src[q:q+rows])
				clear(d[rows:])
			}
		}
		return
	}
	// op(A)[i][pp] = a[i·lda + pp]: each row is contiguous; a panel is
	// the transpose of mr rows.
	for q := 0; q < mcb; q += mr {
		rows := min(mr, mcb-q)
		panel := dst[q*kcb : (q+mr)*kcb]
		done := 0
		if vec && rows == 12 {
			done = kcb / 16 * 16
			tposeF32(panel, 12, p.a[(ic+q)*p.lda+pc:], p.lda, 12, kcb/16)
		}
		for r := range rows {
			src := p.a[(ic+q+r)*p.lda+pc:][:kcb]
			for pp := done; pp < kcb; pp++ {
				panel[pp*mr+r] = src[pp]
			}
		}
		if rows < mr {
			for pp := range kcb {
				clear(panel[pp*mr+rows : pp*mr+mr])
			}
		}
	}
}

// packB copies op(B)[pc:pc+kcb, jc:jc+ncb] into dst as column panels of
// nr: panel q holds columns jc+q·nr … for each p in order, nr floats per p,
// columns past ncb zero. vec (nr 32 only) is packA's.
func packB(dst []float32, p *problem, pc, kcb, jc, ncb, nr int, vec bool) {
	vec = vec && nr == 32
	if p.b16 != nil {
		packBWiden(dst, p, pc, kcb, jc, ncb, nr)
		return
	}
	if !p.transB {
		// op(B)[pp][j] = b[pp·ldb + j]: row pp of B is ncb contiguous
		// values, one run of nr for each panel; fixed-size copies compile to
		// vector moves where copy() would call memmove for 128 bytes.
		for pp := range kcb {
			src := p.b[(pc+pp)*p.ldb+jc:][:ncb]
			q := 0
			if vec {
				q = ncb / 32 * 32
				copyRuns(dst[pp*32:], 32*kcb, src, 32, ncb/32, 0)
			}
			if nr == 32 {
				for ; q+32 <= ncb; q += 32 {
					*(*[32]float32)(dst[q*kcb+pp*32:]) = *(*[32]float32)(src[q:])
				}
			}
			for ; q < ncb; q += nr {
				cols := min(nr, ncb-q)
				d := dst[q*kcb+pp*nr:][:nr]
				copy(d, src[q:q+cols])
				clear(d[cols:])
			}
		}
		return
	}
	// op(B)[pp][j] = b[j·ldb + pp]: each column is a contiguous row of B;
	// a panel is the transpose of nr rows, 16 at a time.
	for q := 0; q < ncb; q += nr {
		cols := min(nr, ncb-q)
		panel := dst[q*kcb : (q+nr)*kcb]
		done := 0
		if vec && cols == 32 {
			done = kcb / 16 * 16
			tposeF32(panel, 32, p.b[(jc+q)*p.ldb+pc:], p.ldb, 16, kcb/16)
			tposeF32(panel[16:], 32, p.b[(jc+q+16)*p.ldb+pc:], p.ldb, 16, kcb/16)
		}
		for j := range cols {
			src := p.b[(jc+q+j)*p.ldb+pc:][:kcb]
			for pp := done; pp < kcb; pp++ {
				panel[pp*nr+j] = src[pp]
			}
		}
		if cols < nr {
			for pp := range kcb {
				clear(panel[pp*nr+cols : pp*nr+nr])
			}
		}
	}
}
