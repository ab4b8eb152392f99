package trainer

import (
	"math"

	"github.com/gotrain/gotrain/zero"
)

// overlapDepth is how many gradient reductions the engine lets be in flight
// with overlap_comm (zero.Options.OverlapComm: at most two).
const overlapDepth = 2

// stepTransients is the largest transient memory of a step, in elements:
// stage-3 gathered parameter windows and stage-2/3 gradient windows at the
// moment their byte sum peaks.
type stepTransients struct {
	gathered int64 // parameter elements (ParamDType)
	windows  int64 // gradient window elements (GradAccumDType)
}

// simWindow is one gathered stage-3 group, as the engine's paramWindow;
// seq is its gather's place in the comm queue.
type simWindow struct {
	refs  int
	ahead bool
	seq   int64
}

// simReduction is a gradient window whose reduction is queued at seq.
type simReduction struct {
	n, seq int64
}

// stepSim replays the model's ParamStore calls (model/store.go) against the
// engine's window policies (zero/params.go: gather, prefetch, eviction and
// retention; zero/grads.go: the gradient window pool). Both depend only on
// the call sequence, except when an overlapped reduction finishes, which is
// taken as late as the engine allows: when the engine waits for it, or for
// any collective queued after it (one goroutine runs them in order).
type stepSim struct {
	o      zero.Options
	padded []int64
	keep   []bool
	ps, gs int64 // element sizes, to find the byte peak

	live             map[int]*simWindow
	liveElems, ahead int64
	backward         bool
	pos              int
	gradFree         []int64 // window lengths
	inflight         []simReduction
	held             map[int]int64
	pool             int64 // gradient window elements allocated so far
	seq, done        int64 // collectives queued so far; all up to done have finished
	peak             stepTransients
}

// simulateStep replays two optimizer steps of gas micro-steps each (at
// most three micro-steps per step: the window pool stops growing after the
// first, so later ones repeat) and returns the transient peak.
func simulateStep(plan zero.Plan, o zero.Options, gas int) stepTransients {
	if o.Stage < 2 {
		return stepTransients{}
	}
	s := &stepSim{o: o, live: map[int]*simWindow{}, held: map[int]int64{},
		ps: int64(o.ParamDType.Size()), gs: int64(o.GradAccumDType.Size())}
	for _, gp := range plan.Groups {
		s.padded = append(s.padded, int64(gp.Padded))
		s.keep = append(s.keep, o.Stage == 3 && int64(gp.Len) <= o.PersistenceThreshold)
	}
	G := len(plan.Groups)
	fin := G - 1
	for range 2 {
		for range min(max(gas, 1), 3) {
			// Forward.
			s.acquire(0, false)
			for g := 1; g < fin; g++ {
				s.acquire(g, false)
				s.release(g, false)
			}
			s.acquire(fin, false)
			s.release(fin, false)
			s.release(0, false)
			// Backward.
			s.acquire(0, true)
			s.acquire(fin, true)
			s.acquireGrads(0)
			s.acquireGrads(fin)
			s.release(fin, true)
			s.gradsReady(fin)
			for g := fin - 1; g >= 1; g-- {
				s.acquire(g, true)
				s.acquireGrads(g)
				s.release(g, true)
				s.gradsReady(g)
			}
			s.release(0, true)
			s.gradsReady(0)
		}
		// Step: the reductions finish, then every window is dropped.
		s.reap(0)
		for g := range s.live {
			s.drop(g)
		}
	}
	return s.peak
}

func (s *stepSim) note() {
	if s.liveElems*s.ps+s.pool*s.gs > s.peak.gathered*s.ps+s.peak.windows*s.gs {
		s.peak = stepTransients{gathered: s.liveElems, windows: s.pool}
	}
}

func (s *stepSim) acquire(g int, backward bool) {
	if s.o.Stage < 3 {
		return
	}
	s.backward, s.pos = backward, position(len(s.padded), backward, g)
	if !s.keep[g] {
		w, ok := s.live[g]
		if !ok {
			s.makeRoom(s.padded[g], -1)
			w = s.gather(g, false)
		}
		if w.ahead {
			w.ahead = false
			s.ahead -= s.padded[g]
		}
		w.refs++
	}
	s.prefetch()
	if w, ok := s.live[g]; ok && !s.keep[g] {
		s.done = max(s.done, w.seq) // the model waits for its parameters
	}
}

func (s *stepSim) release(g int, _ bool) {
	if s.o.Stage < 3 || s.keep[g] {
		return
	}
	w := s.live[g]
	w.refs--
	if w.refs > 0 || s.nextUse(g) < s.o.MaxReuseDistance {
		return
	}
	s.drop(g)
}

func (s *stepSim) gather(g int, ahead bool) *simWindow {
	s.seq++
	w := &simWindow{ahead: ahead, seq: s.seq}
	s.live[g] = w
	s.liveElems += s.padded[g]
	if ahead {
		s.ahead += s.padded[g]
	}
	s.note()
	return w
}

// drop frees group g's window once its gather is done.
func (s *stepSim) drop(g int) {
	s.done = max(s.done, s.live[g].seq)
	if s.live[g].ahead {
		s.ahead -= s.padded[g]
	}
	delete(s.live, g)
	s.liveElems -= s.padded[g]
}

func (s *stepSim) prefetch() {
	order := passOrder(len(s.padded), s.backward)
	for _, h := range order[s.pos+1:] {
		if s.keep[h] {
			continue
		}
		if _, ok := s.live[h]; ok {
			continue
		}
		n := s.padded[h]
		if s.ahead+n > s.o.PrefetchBucketSize {
			return
		}
		if !s.makeRoom(n, s.nextUse(h)) {
			return
		}
		s.gather(h, true)
	}
}

// makeRoom evicts retained windows, farthest next use first, until n more
// elements fit under MaxLiveParameters; with need ≥ 0 only windows needed
// later than need, and only if that makes enough room.
func (s *stepSim) makeRoom(n, need int64) bool {
	limit := s.o.MaxLiveParameters
	if s.liveElems+n <= limit {
		return true
	}
	type candidate struct {
		g    int
		next int64
	}
	var cands []candidate
	var free int64
	for g, w := range s.live {
		if w.refs != 0 || w.ahead {
			continue
		}
		if next := s.nextUse(g); need < 0 || next > need {
			cands = append(cands, candidate{g, next})
			free += s.padded[g]
		}
	}
	if need >= 0 && s.liveElems-free+n > limit {
		return false
	}
	for len(cands) > 0 && s.liveElems+n > limit {
		best := 0
		for i, c := range cands {
			if c.next > cands[best].next || (c.next == cands[best].next && c.g > cands[best].g) {
				best = i
			}
		}
		s.drop(cands[best].g)
		cands = append(cands[:best], cands[best+1:]...)
	}
	return s.liveElems+n <= limit
}

// nextUse counts the gathered elements acquired before group g is next:
// the rest of this pass, then the opposite pass.
func (s *stepSim) nextUse(g int) int64 {
	var d int64
	walk := func(order []int) bool {
		for _, h := range order {
			if h == g {
				return true
			}
			if !s.keep[h] {
				d += s.padded[h]
			}
		}
		return false
	}
	G := len(s.padded)
	if walk(passOrder(G, s.backward)[s.pos+1:]) || walk(passOrder(G, !s.backward)) {
		return d
	}
	return math.MaxInt64
}

func (s *stepSim) acquireGrads(g int) {
	s.reap(overlapDepth - 1)
	s.held[g] = s.gradWindow(s.padded[g])
}

func (s *stepSim) gradsReady(g int) {
	s.seq++
	s.inflight = append(s.inflight, simReduction{n: s.held[g], seq: s.seq})
	delete(s.held, g)
	if !s.o.OverlapComm {
		s.reap(0)
	}
}

// reap returns finished reductions' windows to the pool, oldest first,
// waiting until at most keep are in flight.
func (s *stepSim) reap(keep int) {
	for len(s.inflight) > 0 {
		r := s.inflight[0]
		if len(s.inflight) <= keep && r.seq > s.done {
			return
		}
		s.done = max(s.done, r.seq)
		s.gradFree = append(s.gradFree, r.n)
		s.inflight = s.inflight[1:]
	}
}

// gradWindow takes the smallest free window of at least n elements, or
// grows the pool by one of exactly n.
func (s *stepSim) gradWindow(n int64) int64 {
	best := -1
	for i, w := range s.gradFree {
		if w >= n && (best < 0 || w < s.gradFree[best]) {
			best = i
		}
	}
	if best >= 0 {
		w := s.gradFree[best]
		s.gradFree = append(s.gradFree[:best], s.gradFree[best+1:]...)
		return w
	}
	s.pool += n
	s.note()
	return n
}

// passOrder is the order the model acquires groups in: forward 0, 1, …,
// G−1; backward 0, G−1, G−2, …, 1.
func passOrder(groups int, backward bool) []int {
	out := make([]int, groups)
	for i := range out {
		out[i] = position(groups, backward, i)
	}
	return out
}

// position is group g's index in a pass's order (the backward permutation
// is its own inverse).
func position(groups int, backward bool, g int) int {
	if backward {
		return (groups - g) % groups
	}
	return g
}
