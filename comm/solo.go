package comm

import (
	"context"
	"errors"
	"sync"

	"github.com/gotrain/gotrain/backend"
)

// Solo is the Comm of a run with one rank: every collective is the identity
// (ReduceScatter and AllGather copy, since their source and destination are
// different buffers), so the same training code runs with and without peers
// and no socket is opened for a single process.
type Solo struct {
	be      backend.Backend
	mu      sync.Mutex
	aborted error
}

var _ Comm = (*Solo)(nil)

// NewSolo returns the one-rank Comm; be copies buffers.
func NewSolo(be backend.Backend) *Solo { return &Solo{be: be} }

// Rank is 0.
func (s *Solo) Rank() int { return 0 }

// Size is 1.
func (s *Solo) Size() int { return 1 }

func (s *Solo) check(ctx context.Context, k Kind) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted != nil {
		return &AbortedError{Rank: 0, Op: k, Reason: s.aborted}
	}
	return ctx.Err()
}

// AllReduce leaves buf as it is: the sum, mean or maximum over one rank.
func (s *Solo) AllReduce(ctx context.Context, buf backend.Buffer, op Op) error {
	return s.check(ctx, KindAllReduce)
}

// ReduceScatter copies src into dst (they have the same length with one rank).
func (s *Solo) ReduceScatter(ctx context.Context, dst, src backend.Buffer, op Op) error {
	if dst.Len() != src.Len() {
		panic("comm: reduce-scatter lengths differ for one rank")
	}
	if err := s.check(ctx, KindReduceScatter); err != nil {
		return err
	}
	s.be.Copy(dst, src)
	return nil
}

// AllGather copies src into dst.
func (s *Solo) AllGather(ctx context.Context, dst, src backend.Buffer) error {
	if dst.Len() != src.Len() {
		panic("comm: all-gather lengths differ for one rank")
	}
	if err := s.check(ctx, KindAllGather); err != nil {
		return err
	}
	s.be.Copy(dst, src)
	return nil
}

// Broadcast leaves buf as it is.
func (s *Solo) Broadcast(ctx context.Context, buf backend.Buffer, root int) error {
	if root != 0 {
		panic("comm: broadcast root outside a one-rank world")
	}
	return s.check(ctx, KindBroadcast)
}

// Barrier returns at once.
func (s *Solo) Barrier(ctx context.Context) error { return s.check(ctx, KindBarrier) }

// Abort makes every later call fail with reason ("aborted" when nil: a nil
// reason must abort too, as on every other Comm).
func (s *Solo) Abort(reason error) {
	if reason == nil {
		reason = errors.New("aborted")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted == nil {
		s.aborted = reason
	}
}

// Stats is empty: nothing crosses a wire.
func (s *Solo) Stats() Stats { return Stats{} }

// Close does nothing.
func (s *Solo) Close() error { return nil }
