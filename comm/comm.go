// Package comm owns the collective-communication contract every
// data-parallel piece of gotrain talks to: the Comm interface (all-reduce,
// reduce-scatter, all-gather, broadcast, barrier, abort) over backend
// Buffers, its error types (a lost peer, an abort, a timeout), per-op
// statistics for metrics, the rendezvous Store served by rank 0 on
// MASTER_ADDR:MASTER_PORT (only to connections that prove the job secret;
// store_auth.go), and bandwidth measurement helpers.
//
// Implementations live in sub-packages: comm/tcp (CPU, over TCP) and
// comm/ncclcomm (GPU, over NCCL).
package comm

import (
	"context"
	"fmt"
	"time"

	"github.com/gotrain/gotrain/backend"
)

// DefaultTimeout bounds every collective and store call whose context has no
// deadline. It is torch's and DeepSpeed's default process-group timeout.
const DefaultTimeout = 30 * time.Minute

// Op is the reduction applied by AllReduce and ReduceScatter.
type Op uint8

const (
	Sum Op = iota // element-wise sum
	Avg           // Sum, then multiplied by 1/Size in fp32
	Max           // element-wise maximum; a NaN anywhere gives NaN
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Avg:
		return "avg"
	case Max:
		return "max"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Kind names a collective, for errors and statistics.
type Kind uint8

const (
	KindAllReduce Kind = iota
	KindReduceScatter
	KindAllGather
	KindBroadcast
	KindBarrier
	numKinds
)

// Kinds lists every collective kind, in order.
func Kinds() []Kind {
	return []Kind{KindAllReduce, KindReduceScatter, KindAllGather, KindBroadcast, KindBarrier}
}

// String is the name used in messages ("all-reduce").
func (k Kind) String() string {
	switch k {
	case KindAllReduce:
		return "all-reduce"
	case KindReduceScatter:
		return "reduce-scatter"
	case KindAllGather:
		return "all-gather"
	case KindBroadcast:
		return "broadcast"
	case KindBarrier:
		return "barrier"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Label is the Prometheus label value of the op ("all_reduce"), as in
// gotrain_comm_bytes_total{op="all_reduce"}.
func (k Kind) Label() string {
	switch k {
	case KindAllReduce:
		return "all_reduce"
	case KindReduceScatter:
		return "reduce_scatter"
	case KindAllGather:
		return "all_gather"
	case KindBroadcast:
		return "broadcast"
	case KindBarrier:
		return "barrier"
	}
	return fmt.Sprintf("kind_%d", uint8(k))
}

// Comm runs collectives among Size ranks; this process is rank Rank.
//
// Every rank must issue the same collectives in the same order with the same
// lengths, dtypes and ops; an implementation reports a mismatch it detects as
// an error rather than hanging. Collectives are issued from one goroutine at
// a time; Abort, Stats, Rank and Size may be called from any goroutine.
//
// Each call is bounded by ctx's deadline if it has one, else by the Comm's
// default timeout (DefaultTimeout unless configured). A call that times out
// returns a *TimeoutError; a peer that dies makes the pending and every later
// call return a *PeerLostError; an Abort anywhere makes them return an
// *AbortedError. After any of these the Comm is unusable: every later call
// fails with the same cause. Reductions are deterministic: the same inputs
// give bit-identical results, and every rank ends with the same bits.
//
// Buffers are read and written through the Backend the Comm was built with;
// a length mismatch between arguments is a caller bug and panics.
type Comm interface {
	// Rank is this process's rank, 0 ≤ Rank < Size.
	Rank() int
	// Size is the number of ranks.
	Size() int

	// AllReduce reduces buf over all ranks in place.
	AllReduce(ctx context.Context, buf backend.Buffer, op Op) error
	// ReduceScatter reduces src (Size·n elements) over all ranks and leaves
	// chunk Rank (elements [Rank·n, (Rank+1)·n)) in dst (n elements). dst
	// may be src's own chunk Rank (in place, as NCCL defines it); any other
	// overlap is a caller bug.
	ReduceScatter(ctx context.Context, dst, src backend.Buffer, op Op) error
	// AllGather concatenates every rank's src (n elements) into dst
	// (Size·n elements); chunk r comes from rank r. src may be dst's own
	// chunk Rank (in place, as NCCL defines it); any other overlap is a
	// caller bug.
	AllGather(ctx context.Context, dst, src backend.Buffer) error
	// Broadcast copies root's buf into buf on every other rank.
	Broadcast(ctx context.Context, buf backend.Buffer, root int) error
	// Barrier returns once every rank has entered it.
	Barrier(ctx context.Context) error

	// Abort unblocks every pending and future call on this rank with an
	// *AbortedError carrying reason, and tells every peer to do the same.
	Abort(reason error)
	// Stats reports calls, bytes and seconds per collective kind so far.
	Stats() Stats
	// Close releases the Comm's connections. It does not wait for peers to
	// finish their own collectives; call Barrier first for a clean exit.
	Close() error
}
