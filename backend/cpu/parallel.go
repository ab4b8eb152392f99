package cpu

import "sync"

// chunks is how many contiguous chunks parallel splits n units into: at most
// be.threads, and few enough that each chunk has at least grain units (so
// small ops run inline instead of paying for goroutines). The split depends
// only on n, grain and Threads, which keeps reductions deterministic.
func (be *Backend) chunks(n, grain int) int {
	if n <= 0 {
		return 0
	}
	if grain < 1 {
		grain = 1
	}
	k := (n + grain - 1) / grain
	return max(1, min(k, be.threads))
}

// parallel runs fn over [0, n) split into be.chunks(n, grain) contiguous
// chunks; chunk w gets [lo, hi). It returns when every chunk is done. The
// last chunk runs on the calling goroutine.
func (be *Backend) parallel(n, grain int, fn func(w, lo, hi int)) {
	k := be.chunks(n, grain)
	if k == 0 {
		return
	}
	if k == 1 {
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	wg.Add(k - 1)
	for w := 0; w < k-1; w++ {
		go func() {
			defer wg.Done()
			fn(w, w*n/k, (w+1)*n/k)
		}()
	}
	fn(k-1, (k-1)*n/k, n)
	wg.Wait()
}

// scratchPool recycles fp32 scratch for the 16-bit paths of whole-matrix ops
// (a BF16 weight widened for a GEMM) so a training step does not allocate
// hundreds of megabytes per op. It is internal workspace, not accounted in
// any pool, like a GPU library's own workspace.
type scratchPool struct {
	mu   sync.Mutex
	free [][]float32
}

// get returns n elements of unspecified content.
func (p *scratchPool) get(n int) []float32 {
	p.mu.Lock()
	best := -1
	for i, s := range p.free {
		if cap(s) >= n && (best < 0 || cap(s) < cap(p.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		s := p.free[best]
		p.free = append(p.free[:best], p.free[best+1:]...)
		p.mu.Unlock()
		return s[:n]
	}
	p.mu.Unlock()
	return make([]float32, n)
}

// put makes s available again. The pool keeps at most a handful of slices
// (the largest), which bounds what it can hold on to.
func (p *scratchPool) put(s []float32) {
	const keep = 8
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = append(p.free, s[:cap(s)])
	if len(p.free) > keep {
		small := 0
		for i, f := range p.free {
			if cap(f) < cap(p.free[small]) {
				small = i
			}
		}
		p.free = append(p.free[:small], p.free[small+1:]...)
	}
}
