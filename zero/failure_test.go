package zero_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/zero"
)

// A rank whose Comm is aborted makes the other rank's next step fail with
// the abort (not hang), the failure sticks, and Close still frees
// everything.
func TestAbortedPeerFailsTheStep(t *testing.T) {
	cfg := smallGPT2()
	const world = 2
	for _, v := range []struct {
		stage   int
		overlap bool
	}{{0, false}, {1, false}, {2, true}, {3, true}, {3, false}} {
		t.Run(fmt.Sprintf("stage%d/overlap=%v", v.stage, v.overlap), func(t *testing.T) {
			envs := newWorld(t, world)
			r := testRun(cfg, world, 2)
			o := stageOptions(cfg, world, v.stage, v.overlap)
			ctx := context.Background()
			ranks := make([]*rankState, world)
			errs := onEveryRank(world, func(rank int) error {
				s, err := newRank(ctx, envs[rank], r, o)
				if err != nil {
					return err
				}
				ranks[rank] = s
				_, err = s.step(ctx, r, 1, rank)
				return err
			})
			defer func() {
				for _, s := range ranks {
					if s != nil {
						s.close()
					}
				}
			}()
			if err := firstErr(errs); err != nil {
				t.Fatal(err)
			}

			envs[1].c.Abort(errors.New("rank 1 gives up"))
			// A hang would show as this deadline passing instead of an abort.
			guard, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			_, err := ranks[0].step(guard, r, 2, 0)
			var ab *comm.AbortedError
			if !errors.As(err, &ab) || ab.Rank != 1 {
				t.Fatalf("rank 0's step: %v; want rank 1's abort", err)
			}
			if err := ranks[0].eng.ZeroGrad(); !errors.As(err, &ab) {
				t.Fatalf("after the failure ZeroGrad returned %v; want the abort again", err)
			}
			for rank, s := range ranks {
				s.close()
				ranks[rank] = nil
				if left := envs[rank].be.Memory().PoolTotal(backend.Device); left != 0 {
					t.Errorf("rank %d: %d device bytes left after Close", rank, left)
				}
			}
		})
	}
}

// When the engine's context ends while backward waits for a reduction a
// peer never joins, the wait returns the context's error and the engine
// aborts the Comm, which ends the stuck reduction at once (not at the
// Comm's 20 s timeout) and tells the peers; Close then returns and frees
// everything.
func TestCancelledEngineAbortsTheComm(t *testing.T) {
	cfg := smallGPT2()
	const world = 2
	envs := newWorld(t, world)
	r := testRun(cfg, world, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := newRank(ctx, envs[0], r, stageOptions(cfg, world, 2, true))
	if err != nil {
		t.Fatal(err)
	}
	in, tg := r.batch(1, 0)
	if _, err := s.m.Forward(r.rows(in, 0), r.rows(tg, 0), r.B, r.T); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, cancel)
	// Rank 1 never joins the reductions backward queues, and backward
	// waits for them once two are in flight.
	if err := s.m.Backward(1); !errors.Is(err, context.Canceled) {
		t.Fatalf("backward: %v; want the cancellation", err)
	}
	closed := make(chan struct{})
	go func() {
		s.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close is still waiting for the stuck reduction")
	}
	if left := envs[0].be.Memory().PoolTotal(backend.Device); left != 0 {
		t.Errorf("%d device bytes left after Close", left)
	}
	// The stuck reduction shares the engine's context, so the Comm may see
	// the cancellation itself before the engine aborts it; either way it
	// is this rank's abort for that reason.
	var ab *comm.AbortedError
	if err := envs[0].c.Barrier(context.Background()); !errors.As(err, &ab) || ab.Rank != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("the Comm after the cancellation: %v; want this rank's abort for the cancellation", err)
	}
}

// When Step's context ends while it waits for reductions queued during
// backward (under the engine's context, which has no deadline), the engine
// aborts the Comm itself: the stuck reduction ends at once, Close returns,
// and the peers learn why.
func TestStepDeadlineAbortsQueuedReductions(t *testing.T) {
	cfg := smallGPT2()
	cfg.L = 1 // with one block, backward queues every reduction without waiting for one
	const world = 2
	envs := newWorld(t, world)
	r := testRun(cfg, world, 1)
	ctx := context.Background()
	s, err := newRank(ctx, envs[0], r, stageOptions(cfg, world, 2, true))
	if err != nil {
		t.Fatal(err)
	}
	in, tg := r.batch(1, 0)
	if _, err := s.m.Forward(r.rows(in, 0), r.rows(tg, 0), r.B, r.T); err != nil {
		t.Fatal(err)
	}
	if err := s.m.Backward(1); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.eng.Step(short, zero.StepInput{AdamW: backend.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Step: 1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("step: %v; want the deadline", err)
	}
	closed := make(chan struct{})
	go func() {
		s.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close is still waiting for the queued reductions")
	}
	if left := envs[0].be.Memory().PoolTotal(backend.Device); left != 0 {
		t.Errorf("%d device bytes left after Close", left)
	}
	var ab *comm.AbortedError
	if err := envs[0].c.Barrier(ctx); !errors.As(err, &ab) || ab.Rank != 0 || !strings.Contains(err.Error(), "zero: waiting for reduce-scatter") {
		t.Fatalf("the Comm after the step: %v; want this rank's abort naming the wait", err)
	}
}

// A step whose own context ends while a peer never joins its reduction
// returns the deadline error, and the engine stays failed.
func TestStepDeadline(t *testing.T) {
	cfg := smallGPT2()
	const world = 2
	envs := newWorld(t, world)
	r := testRun(cfg, world, 1)
	ctx := context.Background()
	s, err := newRank(ctx, envs[0], r, stageOptions(cfg, world, 1, false))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	in, tg := r.batch(1, 0)
	if _, err := s.m.Forward(r.rows(in, 0), r.rows(tg, 0), r.B, r.T); err != nil {
		t.Fatal(err)
	}
	if err := s.m.Backward(1); err != nil { // stage 1: no collective yet
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.eng.Step(short, zero.StepInput{AdamW: backend.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Step: 1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("step: %v; want the deadline", err)
	}
	if _, err := s.eng.Step(ctx, zero.StepInput{AdamW: backend.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Step: 1}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the next step: %v; want the same failure", err)
	}
}
