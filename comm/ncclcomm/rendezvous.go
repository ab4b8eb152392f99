package ncclcomm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gotrain/gotrain/nccl"
)

// keys are the Store keys of one communicator: its name and which of the
// ranks' successive Comms of that name it is.
type keys struct{ prefix string }

func (k keys) id() string         { return k.prefix + "/unique-id" }
func (k keys) joined() string     { return k.prefix + "/joined" }
func (k keys) abortClaim() string { return k.prefix + "/abort-claims" }
func (k keys) abort() string      { return k.prefix + "/abort" }

// rendezvous agrees on the communicator's unique id: rank 0 makes it and
// publishes it, the others wait for it, and all meet at a Store barrier so
// that ncclCommInitRank, which cannot be interrupted, starts only once
// every rank is there.
func (c *Comm) rendezvous(ctx context.Context, name string, lib *nccl.Library) (nccl.UniqueID, error) {
	var id nccl.UniqueID
	// Each rank counts its own Comms of this name, so the n-th of every
	// rank share keys whatever order the ranks arrive in.
	n, err := c.store.Add(ctx, fmt.Sprintf("ncclcomm/%s/rank%d/created", name, c.rank), 1)
	if err != nil {
		return id, fmt.Errorf("ncclcomm: rank %d: count communicators in the store: %w", c.rank, err)
	}
	c.keys = keys{prefix: fmt.Sprintf("ncclcomm/%s/%d", name, n)}
	if c.rank == 0 {
		if id, err = lib.UniqueID(); err != nil {
			return id, fmt.Errorf("ncclcomm: rank 0: %w", err)
		}
		if err := c.store.Set(ctx, c.keys.id(), id[:]); err != nil {
			return id, fmt.Errorf("ncclcomm: rank 0: publish the NCCL unique id: %w", err)
		}
	} else {
		b, err := c.store.Get(ctx, c.keys.id())
		if err != nil {
			return id, fmt.Errorf("ncclcomm: rank %d: wait for rank 0's NCCL unique id: %w", c.rank, err)
		}
		if len(b) != len(id) {
			return id, fmt.Errorf("ncclcomm: rank %d: the NCCL unique id in the store has %d bytes, want %d", c.rank, len(b), len(id))
		}
		copy(id[:], b)
	}
	if err := c.store.Barrier(ctx, c.keys.joined()); err != nil {
		return id, fmt.Errorf("ncclcomm: rank %d: wait for every rank before ncclCommInitRank: %w", c.rank, err)
	}
	return id, nil
}

// storeGrace bounds the Store calls of the failure path: a failing world
// may have lost the Store too, and an abort must not wait for it long.
const storeGrace = 2 * time.Second

// publish writes this rank's failure to the Store before the communicator
// is aborted, so that the peers NCCL then fails can say who aborted and
// why. Only the first rank to claim the key writes it. Errors are ignored:
// the abort goes ahead regardless.
func (c *Comm) publish(cs cause) {
	ctx, cancel := context.WithTimeout(context.Background(), storeGrace)
	defer cancel()
	if n, err := c.store.Add(ctx, c.keys.abortClaim(), 1); err == nil && n == 1 {
		_ = c.store.Set(ctx, c.keys.abort(), []byte(strconv.Itoa(cs.rank)+"\n"+cs.err.Error()))
	}
}

// remoteCause is the failure behind an NCCL error that says a peer failed
// or aborted: the published one, or, when no rank published one within
// storeGrace (a process died), this rank's abort wrapping NCCL's error.
func (c *Comm) remoteCause(ncclErr error) cause {
	ctx, cancel := context.WithTimeout(context.Background(), storeGrace)
	defer cancel()
	if b, err := c.store.Get(ctx, c.keys.abort()); err == nil {
		if r, reason, ok := strings.Cut(string(b), "\n"); ok {
			if rank, err := strconv.Atoi(r); err == nil {
				return cause{rank: rank, err: errors.New(reason)}
			}
		}
	}
	return cause{rank: c.rank, err: fmt.Errorf("ncclcomm: NCCL reports a failed or aborted peer, and no rank published why (did a process die?): %w", ncclErr)}
}
