package ncclcomm

import (
	"errors"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
)

// TestComm runs the tests that need the ordinary mock NCCL on one build of
// the mock libraries, since each build is a compiler run.
func TestComm(t *testing.T) {
	w := newWorld(t)
	t.Run("Conformance", func(t *testing.T) { testConformance(t, w) })
	t.Run("SuccessiveCommsOfOneName", func(t *testing.T) { testSuccessiveCommsOfOneName(t, w) })
	t.Run("CloseReleasesDeviceMemory", func(t *testing.T) { testCloseReleasesDeviceMemory(t, w) })
	t.Run("PeerGoneWithoutReason", func(t *testing.T) { testPeerGoneWithoutReason(t, w) })
	t.Run("UnknownOpIsRefused", func(t *testing.T) { testUnknownOpIsRefused(t, w) })
	t.Run("CallerBugsPanic", func(t *testing.T) { testCallerBugsPanic(t, w) })
	t.Run("HostBuffersAreStaged", func(t *testing.T) { testHostBuffersAreStaged(t, w) })
}

// testConformance runs the suite on the mock NCCL. What ncclcomm declares
// is NCCL's: U16 moves but does not reduce and int32 has no average;
// numerics may round at each ring step; Max need not propagate NaN; a
// timeout cannot say whom it waited for; and a lost peer shows as an abort,
// since NCCL does not say which peer failed.
func testConformance(t *testing.T, w *world) {
	commtest.Run(t, func(t *testing.T, size int, timeout time.Duration) []commtest.Rank {
		return w.ranks(t, size, func(o *Options) { o.Timeout = timeout })
	}, commtest.Options{
		Refuses: func(dt backend.DType, op comm.Op) bool {
			return dt == backend.U16 || (op == comm.Avg && !dt.IsFloat())
		},
		Approximate:         true,
		MaxIgnoresNaN:       true,
		TimeoutPeersUnknown: true,
		PeerLossAsAbort:     true,
		// A process that dies leaves its communicator gone and nothing in
		// the Store. (Marking it failed only lets Close skip the clean
		// shutdown.)
		Kill: func(c comm.Comm) {
			nc := c.(*Comm)
			nc.fail(cause{rank: nc.rank, err: errors.New("killed")})
			_ = nc.releaseNCCL(true)
		},
	})
}
