package zero

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gotrain/gotrain/backend"
)

// paramWindow is a partitioned group gathered whole: buf (Params category,
// Padded long) is filled by gather; refs counts the model's acquisitions
// not yet released; ahead marks a prefetch not yet acquired. A window with
// no refs that is not ahead is retained for a later pass and may be
// evicted.
type paramWindow struct {
	buf    backend.Buffer
	gather *commOp
	refs   int
	ahead  bool
}

func (w *paramWindow) retained() bool { return w.refs == 0 && !w.ahead }

// Acquire implements the model's ParamStore: group g's parameters (n_g
// elements, indexed from the group's first element) for the forward or
// backward pass and, for backward, the buffer its gradients accumulate into
// (see acquireGrads); forward, and a Frozen engine, give the zero Buffer
// for them. Whole
// parameters are a slice of the resident ones. Partitioned ones are a
// persistent group's resident copy, or else the group's gathered window:
// one already live (acquired, prefetched or retained) or a new all-gather;
// then the groups that follow in the pass's order are prefetched (see the
// package documentation).
func (e *Engine) Acquire(g int, backward bool) (params, grads backend.Buffer, err error) {
	if err := e.usable(); err != nil {
		return backend.Buffer{}, backend.Buffer{}, err
	}
	if backward && e.o.Inference && !e.o.Frozen {
		return backend.Buffer{}, backend.Buffer{}, e.fail(errors.New("zero: an inference engine has no gradients; build the engine without Options.Inference to train"))
	}
	if params, err = e.acquireParams(g, backward); err != nil {
		return backend.Buffer{}, backend.Buffer{}, err
	}
	if backward && !e.o.Inference {
		if grads, err = e.acquireGrads(g); err != nil {
			return backend.Buffer{}, backend.Buffer{}, err
		}
	}
	return params, grads, nil
}

// Release implements the model's ParamStore: the pass is done with group
// g. Its parameters are released (see releaseParams) and, for backward,
// its gradient contribution of this micro-batch is complete (see
// gradsReady).
func (e *Engine) Release(g int, backward bool) error {
	if err := e.usable(); err != nil {
		return err
	}
	if err := e.releaseParams(g); err != nil {
		return err
	}
	if backward && !e.o.Inference {
		return e.gradsReady(g)
	}
	return nil
}

func (e *Engine) acquireParams(g int, backward bool) (backend.Buffer, error) {
	gp := e.plan.Groups[g]
	if !e.o.paramsPartitioned() {
		return e.params.Slice(e.flat.Groups[g].PaddedOff, gp.Len), nil
	}
	e.backward, e.at = backward, e.position(backward, g)
	var w *paramWindow
	if !e.persistent[g] {
		var ok bool
		if w, ok = e.live[g]; !ok {
			if _, err := e.makeRoom(gp.Padded, -1); err != nil {
				return backend.Buffer{}, err
			}
			var err error
			if w, err = e.gather(g, false); err != nil {
				return backend.Buffer{}, e.fail(err)
			}
		}
		if w.ahead {
			w.ahead = false
			e.aheadElems -= gp.Padded
		}
		w.refs++
	}
	if err := e.prefetch(); err != nil {
		return backend.Buffer{}, err
	}
	if w == nil {
		return e.persistBuf[g].Slice(0, gp.Len), nil
	}
	if err := e.wait(e.ctx, w.gather); err != nil {
		return backend.Buffer{}, err
	}
	return w.buf.Slice(0, gp.Len), nil
}

// releaseParams: once every acquisition of a partitioned group is
// released, its window is kept if the group's next use comes within
// MaxReuseDistance and freed otherwise.
func (e *Engine) releaseParams(g int) error {
	if !e.o.paramsPartitioned() || e.persistent[g] {
		return nil
	}
	w, ok := e.live[g]
	if !ok || w.refs == 0 {
		return e.fail(fmt.Errorf("zero: release of group %d's parameters, which are not acquired", g))
	}
	w.refs--
	if w.refs > 0 || e.nextUse(g) < e.o.MaxReuseDistance {
		return nil
	}
	return e.dropWindow(g)
}

// gather queues group g's all-gather into a new window.
func (e *Engine) gather(g int, ahead bool) (*paramWindow, error) {
	gp := e.plan.Groups[g]
	buf, err := e.be.Alloc(backend.Device, backend.Params, e.o.ParamDType, gp.Padded)
	if err != nil {
		return nil, fmt.Errorf("zero: allocate the gathered parameters of group %d (%d × %s): %w", g, gp.Padded, e.o.ParamDType, err)
	}
	w := &paramWindow{buf: buf, ahead: ahead}
	w.gather = e.submit(e.ctx, fmt.Sprintf("all-gather parameters of group %d", g), func(ctx context.Context) error {
		return e.allGatherChunk(ctx, buf, g)
	})
	e.live[g] = w
	e.liveElems += gp.Padded
	e.stats.PeakLiveElements = max(e.stats.PeakLiveElements, e.liveElems)
	e.stats.Gathers++
	if ahead {
		e.aheadElems += gp.Padded
		e.stats.Prefetches++
	}
	return w, nil
}

// prefetch queues the gathers of the groups after the current one in the
// pass's order while each fits: the elements gathered ahead of use stay
// within PrefetchBucketSize and the live total within MaxLiveParameters,
// evicting retained windows needed later than the prefetched group if that
// makes room. It stops at the first group that does not fit, so gathers
// stay in use order, and it depends only on the call sequence, never on
// timing, so every rank queues the same gathers.
func (e *Engine) prefetch() error {
	for _, h := range e.passOrder(e.backward)[e.at+1:] {
		if e.persistent[h] {
			continue
		}
		if _, ok := e.live[h]; ok {
			continue
		}
		n := e.plan.Groups[h].Padded
		if int64(e.aheadElems+n) > e.o.PrefetchBucketSize {
			return nil
		}
		fits, err := e.makeRoom(n, e.nextUse(h))
		if err != nil {
			return err
		}
		if !fits {
			return nil
		}
		if _, err := e.gather(h, true); err != nil {
			return e.fail(err)
		}
	}
	return nil
}

// makeRoom evicts retained windows, the one needed farthest in the future
// first, until n more gathered elements fit within MaxLiveParameters. With
// need ≥ 0 (a prefetch needed that far ahead) it evicts only windows needed
// later than that, and only if that makes enough room; with need < 0 (an
// acquisition, which gathers in any case) it evicts what it can. It reports
// whether n now fits.
func (e *Engine) makeRoom(n int, need int64) (bool, error) {
	limit := e.o.MaxLiveParameters
	if int64(e.liveElems+n) <= limit {
		return true, nil
	}
	type candidate struct {
		g    int
		next int64
	}
	var cands []candidate
	free := 0
	for g, w := range e.live {
		if !w.retained() {
			continue
		}
		if next := e.nextUse(g); need < 0 || next > need {
			cands = append(cands, candidate{g, next})
			free += e.plan.Groups[g].Padded
		}
	}
	if need >= 0 && int64(e.liveElems-free+n) > limit {
		return false, nil
	}
	// Farthest next use first; ties (impossible for distinct groups in a
	// pass order, but cheap to make deterministic) by group.
	for len(cands) > 0 && int64(e.liveElems+n) > limit {
		best := 0
		for i, c := range cands {
			if c.next > cands[best].next || (c.next == cands[best].next && c.g > cands[best].g) {
				best = i
			}
		}
		g := cands[best].g
		cands = append(cands[:best], cands[best+1:]...)
		if err := e.dropWindow(g); err != nil {
			return false, err
		}
	}
	return int64(e.liveElems+n) <= limit, nil
}

// nextUse is how many gathered elements the model will acquire before it
// next acquires group g: the rest of the current pass after the current
// group, then the next pass (a forward pass is taken to be followed by a
// backward one and a backward by a forward, as in training).
func (e *Engine) nextUse(g int) int64 {
	var d int64
	walk := func(order []int) bool {
		for _, h := range order {
			if h == g {
				return true
			}
			if !e.persistent[h] {
				d += int64(e.plan.Groups[h].Padded)
			}
		}
		return false
	}
	if walk(e.passOrder(e.backward)[e.at+1:]) || walk(e.passOrder(!e.backward)) {
		return d
	}
	return math.MaxInt64
}

// passOrder is the order the model acquires groups in during a forward
// (backward false) or backward pass, as its layout says.
func (e *Engine) passOrder(backward bool) []int {
	if backward {
		return e.order[1]
	}
	return e.order[0]
}

// position is group g's index in a pass's order.
func (e *Engine) position(backward bool, g int) int {
	if backward {
		return e.pos[1][g]
	}
	return e.pos[0][g]
}

// dropWindow frees group g's window once its gather is done.
func (e *Engine) dropWindow(g int) error {
	w := e.live[g]
	if err := e.wait(e.ctx, w.gather); err != nil {
		return err // the gather may still be writing: Close frees the window after the comm goroutine exits
	}
	delete(e.live, g)
	e.liveElems -= e.plan.Groups[g].Padded
	if w.ahead {
		e.aheadElems -= e.plan.Groups[g].Padded
	}
	e.be.Free(w.buf)
	return nil
}

// dropWindows frees every window before the parameters change: prefetched
// and retained ones would hold stale values after a step. A window still
// acquired is a bug in the caller's pass.
func (e *Engine) dropWindows() error {
	for g := range e.groups {
		w, ok := e.live[g]
		if !ok {
			continue
		}
		if w.refs > 0 {
			return e.fail(fmt.Errorf("zero: step while group %d's parameters are still acquired", g))
		}
		if err := e.dropWindow(g); err != nil {
			return err
		}
	}
	return nil
}
