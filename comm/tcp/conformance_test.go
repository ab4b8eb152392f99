package tcp

import (
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

// conformance is what comm/tcp declares to the suite: integer buffers
// have no average, and a rank can be killed (its sockets closed without a
// word, as the kernel does for a dead process). Everything else is the
// contract in full: fp32 reductions rounded once, NaN-propagating Max,
// timeouts naming the ranks waited for, a lost peer named on every rank,
// and every kind of disagreement detected.
func conformance() commtest.Options {
	return commtest.Options{
		Refuses: func(dt backend.DType, op comm.Op) bool { return op == comm.Avg && !dt.IsFloat() },
		Kill:    func(c comm.Comm) { c.(*Comm).kill() },
	}
}

func TestConformance(t *testing.T) {
	commtest.Run(t, func(t *testing.T, size int, timeout time.Duration) []commtest.Rank {
		return newWorld(t, size, func(o *Options) { o.Timeout = timeout })
	}, conformance())
}

// TestConformanceInSmallSegments moves every message in 1000-byte
// segments, so chunk edges fall inside segments and each large message
// spans hundreds of them.
func TestConformanceInSmallSegments(t *testing.T) {
	o := conformance()
	o.Sizes = []int{3}
	commtest.RunCollectives(t, func(t *testing.T, size int, timeout time.Duration) []commtest.Rank {
		return newWorld(t, size, func(o *Options) { o.Timeout, o.SegmentBytes = timeout, 1000 })
	}, o)
}
