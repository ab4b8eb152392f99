package comm

import (
	"context"
	"fmt"
	"sync"

	"github.com/gotrain/gotrain/backend"
)

// Null is a Comm that plays rank Rank of a world of Size without talking to
// anyone: every collective checks its arguments as a real one must (the
// lengths Size implies) and counts its call and payload bytes as the
// others do, then leaves the buffers as they are. Run on an accounting
// backend (backend/meta), the real training code learns what one rank of a
// larger world holds and sends, without that world: gotrain estimate and
// the GPU cost model work this way. It is safe for concurrent use.
type Null struct {
	rank, size int

	mu      sync.Mutex
	stats   Stats
	aborted error
}

var _ Comm = (*Null)(nil)

// NewNull returns rank rank of a world of size that exchanges nothing. A
// rank outside [0, size) is a bug in the caller and panics.
func NewNull(rank, size int) *Null {
	if size < 1 || rank < 0 || rank >= size {
		panic(fmt.Sprintf("comm: null comm rank %d of %d", rank, size))
	}
	return &Null{rank: rank, size: size}
}

// Rank is the rank this Comm plays.
func (n *Null) Rank() int { return n.rank }

// Size is the world size it plays.
func (n *Null) Size() int { return n.size }

func (n *Null) record(ctx context.Context, k Kind, bytes int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.aborted != nil {
		return &AbortedError{Rank: n.rank, Op: k, Reason: n.aborted}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	n.stats.Add(k, int64(bytes), 0)
	return nil
}

// AllReduce counts buf's bytes.
func (n *Null) AllReduce(ctx context.Context, buf backend.Buffer, op Op) error {
	return n.record(ctx, KindAllReduce, buf.Bytes())
}

// ReduceScatter checks that src holds Size chunks of dst's length.
func (n *Null) ReduceScatter(ctx context.Context, dst, src backend.Buffer, op Op) error {
	if src.Len() != n.size*dst.Len() || src.DType() != dst.DType() {
		panic("comm: reduce-scatter source is not Size chunks of the destination")
	}
	return n.record(ctx, KindReduceScatter, src.Bytes())
}

// AllGather checks that dst holds Size chunks of src's length.
func (n *Null) AllGather(ctx context.Context, dst, src backend.Buffer) error {
	if dst.Len() != n.size*src.Len() || src.DType() != dst.DType() {
		panic("comm: all-gather destination is not Size chunks of the source")
	}
	return n.record(ctx, KindAllGather, dst.Bytes())
}

// Broadcast counts buf's bytes.
func (n *Null) Broadcast(ctx context.Context, buf backend.Buffer, root int) error {
	if root < 0 || root >= n.size {
		panic("comm: broadcast root outside the world")
	}
	return n.record(ctx, KindBroadcast, buf.Bytes())
}

// Barrier returns at once.
func (n *Null) Barrier(ctx context.Context) error { return n.record(ctx, KindBarrier, 0) }

// Abort makes every later call fail with reason.
func (n *Null) Abort(reason error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.aborted == nil {
		n.aborted = reason
	}
}

// Stats reports the calls and bytes a real Comm would have carried (no
// seconds: nothing was sent).
func (n *Null) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Close does nothing.
func (n *Null) Close() error { return nil }
