// Package commtest owns the one conformance suite every comm.Comm runs and
// the in-process world harness that the tests of comm's implementations and
// users share.
//
// Run checks an implementation against the whole contract of comm.Comm:
// every collective with every dtype and op against float64 references, on
// views into larger allocations whose surroundings must not change, in
// place (NCCL's definition for the sharded ops); determinism (the same bits
// on every rank and across runs); barriers; statistics; caller bugs that
// panic; a timeout that names the missing ranks; cancellation; abort; a
// lost peer; and ranks that disagree on a call. What an implementation
// cannot do, or does where the contract leaves room, it declares in
// Options, and the suite checks the declared behaviour instead.
//
// NewWorld, Stores, OnEveryRank and FirstErr are the harness: ranks are
// goroutines of the test process that meet at a rendezvous store on
// 127.0.0.1, exactly as separate processes do.
//
// The package imports comm and backend only; implementations pass their
// constructors in, so their own internal tests can use it without a cycle.
package commtest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// NewWorldFunc returns a fresh world of size ranks of the implementation
// under test, whose Comms bound every call without a deadline by timeout,
// and closes it when t ends. NewWorld does most of the work of one.
type NewWorldFunc func(t *testing.T, size int, timeout time.Duration) []Rank

// Disagreement is one way the ranks can disagree on a call.
type Disagreement uint8

const (
	DisagreeKind   Disagreement = iota // an all-reduce on some ranks, a broadcast on another
	DisagreeLength                     // one rank's buffer is one element longer
	DisagreeDType                      // one rank's buffer is bf16, the others' fp32
	DisagreeOp                         // one rank takes the maximum, the others the sum
	DisagreeRoot                       // one rank broadcasts from another root
)

// Disagreements lists every Disagreement, in order.
func Disagreements() []Disagreement {
	return []Disagreement{DisagreeKind, DisagreeLength, DisagreeDType, DisagreeOp, DisagreeRoot}
}

func (d Disagreement) String() string {
	switch d {
	case DisagreeKind:
		return "kind"
	case DisagreeLength:
		return "length"
	case DisagreeDType:
		return "dtype"
	case DisagreeOp:
		return "op"
	case DisagreeRoot:
		return "root"
	}
	return fmt.Sprintf("Disagreement(%d)", uint8(d))
}

// Options declare what an implementation does where the contract leaves it
// room, or where it falls short of the contract (those fields say so). The
// zero value claims the whole contract.
type Options struct {
	// Sizes are the world sizes to test; default 1, 2, 3 and 4. Failure
	// tests need two or more ranks; without such a size they are skipped,
	// saying why.
	Sizes []int
	// Refuses reports the reductions (dtype, op) the implementation refuses.
	// The suite checks that it refuses them on every rank with a plain error
	// (not an abort, a timeout or a lost peer) that leaves the Comm healthy.
	// nil: every dtype reduces with every op.
	Refuses func(dt backend.DType, op comm.Op) bool
	// Approximate: a reduction may round more than once (NCCL rounds 16-bit
	// partial sums at each ring step and scales Avg's inputs before summing);
	// results are checked against float64 within the roundings of Size
	// steps. Zero: the contract's numerics exactly (the fp32 sum rounded to
	// the dtype once; Avg is that sum times fl32(1/Size), rounded once).
	Approximate bool
	// MaxIgnoresNaN: Max need not propagate a NaN (NCCL's comparison keeps
	// whichever operand it likes). The contract says a NaN anywhere gives NaN.
	MaxIgnoresNaN bool
	// NoStats: Stats stays empty (comm.Solo: nothing crosses a wire). The
	// suite checks that it does.
	NoStats bool
	// TimeoutPeersUnknown: a *comm.TimeoutError cannot name the ranks it
	// waited for (NCCL does not say), so its Peers is empty. The contract
	// asks for them; the suite checks the field is empty rather than wrong.
	TimeoutPeersUnknown bool
	// Kill makes c's process die as far as its peers can tell: its
	// connections drop without a word of why. nil: the implementation cannot
	// lose a peer (comm.Solo), and the peer-loss tests are skipped, saying so.
	Kill func(c comm.Comm)
	// PeerLossAsAbort: the ranks that survive a lost peer get a
	// *comm.AbortedError (from whichever rank noticed first) instead of the
	// contract's *comm.PeerLostError naming the lost rank (NCCL does not say
	// which peer failed).
	PeerLossAsAbort bool
	// Undetected lists the disagreements the implementation cannot see.
	// They must still end, by the call's deadline, with a
	// *comm.TimeoutError. Every other disagreement must fail fast with a
	// *comm.AbortedError that says the ranks disagree.
	Undetected []Disagreement
}

func (o Options) withDefaults() Options {
	if len(o.Sizes) == 0 {
		o.Sizes = []int{1, 2, 3, 4}
	}
	if o.Refuses == nil {
		o.Refuses = func(backend.DType, comm.Op) bool { return false }
	}
	return o
}

// failSize is the world size of the failure tests: 3 where allowed, so a
// failure must travel past the rank that saw it, else 2; 0 when Sizes has
// no multi-rank world.
func (o Options) failSize() int {
	best := 0
	for _, s := range o.Sizes {
		if s >= 2 && s <= 3 && s > best {
			best = s
		}
	}
	if best == 0 {
		for _, s := range o.Sizes {
			if s > 3 && (best == 0 || s < best) {
				best = s
			}
		}
	}
	return best
}

// peersSize is failSize where Sizes has a world with peers, so that bytes
// and news cross a wire, else the smallest size.
func (o Options) peersSize() int {
	if n := o.failSize(); n > 0 {
		return n
	}
	return o.minSize()
}

// maxSize is the largest world size in Sizes.
func (o Options) maxSize() int { return slices.Max(o.Sizes) }

// minSize is the smallest world size in Sizes.
func (o Options) minSize() int { return slices.Min(o.Sizes) }

// suite is one Run: the implementation's world constructor and its
// declarations.
type suite struct {
	newWorld NewWorldFunc
	o        Options
}

// Run runs the whole conformance suite as subtests of t. newWorld is called
// at least once per subtest; the suite frees every Buffer it allocates.
func Run(t *testing.T, newWorld NewWorldFunc, o Options) {
	s := &suite{newWorld: newWorld, o: o.withDefaults()}
	t.Run("Collectives", s.testCollectives)
	t.Run("Determinism", s.testDeterminism)
	t.Run("Barrier", s.testBarrier)
	t.Run("Stats", s.testStats)
	t.Run("CallerBugs", s.testCallerBugs)
	t.Run("Timeout", s.testTimeout)
	t.Run("Cancel", s.testCancel)
	t.Run("Abort", s.testAbort)
	t.Run("PeerLoss", s.testPeerLoss)
	t.Run("Disagreement", s.testDisagreement)
}

// RunCollectives runs only the data tests of Run (every collective, dtype
// and op, determinism), for an implementation that wants them again on a
// differently configured world (comm/tcp with tiny segments) without
// repeating the failure tests.
func RunCollectives(t *testing.T, newWorld NewWorldFunc, o Options) {
	s := &suite{newWorld: newWorld, o: o.withDefaults()}
	t.Run("Collectives", s.testCollectives)
	t.Run("Determinism", s.testDeterminism)
}

// needFailWorld is failSize, skipping t (saying why) when Sizes has no
// world of two or more ranks.
func (s *suite) needFailWorld(t *testing.T) int {
	t.Helper()
	n := s.o.failSize()
	if n == 0 {
		t.Skipf("needs a world of 2 or more ranks; Options.Sizes %v has none", s.o.Sizes)
	}
	return n
}
