package ncclcomm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/nccl"
)

// Options configures New. Store, Device and Lib are required.
type Options struct {
	Rank, Size int // must equal the Store's
	// Store is the rendezvous store: it carries the NCCL unique id from
	// rank 0 and, after a failure, the aborting rank's reason.
	Store comm.Store
	// Device is this rank's GPU; the Comm's stream, event and barrier word
	// live on it and every NCCL call but the abort runs on its thread.
	Device *cuda.Device
	// Lib is the loaded NCCL, 2.10.3 or later.
	Lib *nccl.Library
	// Timeout bounds each call whose context has no deadline, and New
	// (default comm.DefaultTimeout, the --comm-timeout flag).
	Timeout time.Duration
	// ComputeStream is the stream the backend queues kernels on: each
	// collective waits for what is queued there when it is called.
	ComputeStream cuda.Stream
	// Name separates communicators sharing one Store (default "world").
	// Creating several Comms of one name in sequence is fine: every rank
	// counts its own creations, and the n-th Comm of each rank joins the
	// n-th of the others.
	Name string
}

// Comm is a comm.Comm over NCCL for one GPU per rank. See the package
// documentation.
type Comm struct {
	rank, size int
	timeout    time.Duration
	store      comm.Store
	keys       keys
	dev        *cuda.Device
	nc         *nccl.Comm
	compute    cuda.Stream
	stream     cuda.Stream    // the Comm's own; NCCL runs here
	ready      cuda.Event     // recorded on compute, waited for by stream
	done       cuda.Event     // recorded on stream after a call, waited for by compute and the caller
	word       cuda.DevicePtr // one int32 that Barrier all-reduces
	stage      cuda.DevicePtr // staging for host buffers (staging.go)
	pinned     cuda.HostBuffer
	stageBytes int

	fmu    sync.Mutex
	cause  *cause        // the first failure; nil while healthy
	failed chan struct{} // closed when cause is set

	// The NCCL communicator's life: calls on the device thread hold busy;
	// releasing it (abort or clean close) sets gone first.
	gmu        sync.Mutex
	gone       bool
	busy       int
	idle       chan struct{} // closed when busy drops to 0, if someone waits
	release    sync.Once
	releaseErr error

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error

	smu   sync.Mutex
	stats comm.Stats
}

var _ comm.Comm = (*Comm)(nil)

// New joins this rank to the NCCL communicator of the Store's world: rank
// 0 makes the unique id and publishes it, every rank waits for it and for
// the others on the Store, then all call ncclCommInitRank together. It is
// bounded by ctx's deadline, else Options.Timeout (see the package
// documentation for the one wait NCCL cannot abort).
func New(ctx context.Context, o Options) (*Comm, error) {
	switch {
	case o.Store == nil || o.Device == nil || o.Lib == nil:
		return nil, errors.New("ncclcomm: Options need a Store, a Device and a Lib")
	case o.Rank != o.Store.Rank() || o.Size != o.Store.Size():
		return nil, fmt.Errorf("ncclcomm: options say rank %d of %d but the store joined rank %d of %d", o.Rank, o.Size, o.Store.Rank(), o.Store.Size())
	case !o.Lib.Version().AtLeast(2, 10, 3):
		return nil, fmt.Errorf("ncclcomm: NCCL %v (%s) is too old: gotrain needs NCCL 2.10.3 or later (bfloat16 and the avg reduction); install a newer libnccl2 or set %s",
			o.Lib.Version(), o.Lib.Path(), nccl.EnvLibrary)
	}
	c := &Comm{
		rank:    o.Rank,
		size:    o.Size,
		timeout: o.Timeout,
		store:   o.Store,
		dev:     o.Device,
		compute: o.ComputeStream,
		failed:  make(chan struct{}),
		closed:  make(chan struct{}),
	}
	if c.timeout <= 0 {
		c.timeout = comm.DefaultTimeout
	}
	name := o.Name
	if name == "" {
		name = "world"
	}
	ctx, cancel := context.WithDeadline(ctx, callDeadline(ctx, c.timeout))
	defer cancel()

	id, err := c.rendezvous(ctx, name, o.Lib)
	if err != nil {
		return nil, err
	}
	if err := c.dev.Do(c.allocate); err != nil {
		return nil, fmt.Errorf("ncclcomm: rank %d: set up stream, event and barrier word: %w", c.rank, err)
	}
	if err := c.initRank(ctx, o.Lib, id); err != nil {
		return nil, errors.Join(err, c.dev.Do(c.free))
	}
	return c, nil
}

// allocate creates the Comm's device resources, undoing what it made on
// failure. The stream does not synchronise with the legacy default stream:
// ordering with compute is the explicit event.
func (c *Comm) allocate(x *cuda.Ctx) (err error) {
	if c.stream, err = x.NewStream(true); err != nil {
		return err
	}
	if c.ready, err = x.NewEvent(false); err != nil {
		return errors.Join(err, x.DestroyStream(c.stream))
	}
	if c.done, err = x.NewEvent(false); err != nil {
		return errors.Join(err, x.DestroyEvent(c.ready), x.DestroyStream(c.stream))
	}
	if c.word, err = x.Alloc(4); err != nil {
		return errors.Join(err, x.DestroyEvent(c.done), x.DestroyEvent(c.ready), x.DestroyStream(c.stream))
	}
	return nil
}

// free destroys what allocate made.
func (c *Comm) free(x *cuda.Ctx) error {
	var stage error
	if c.stage != 0 {
		stage = x.Free(c.stage)
	}
	if c.pinned.Len() > 0 {
		stage = errors.Join(stage, x.FreeHost(c.pinned))
	}
	c.stage, c.pinned, c.stageBytes = 0, cuda.HostBuffer{}, 0
	return errors.Join(stage, x.Free(c.word), x.DestroyEvent(c.done), x.DestroyEvent(c.ready), x.DestroyStream(c.stream))
}

// initRank runs ncclCommInitRank on the device thread. Past the deadline
// it returns without it: the call cannot be aborted and keeps the device
// thread until the missing rank joins.
func (c *Comm) initRank(ctx context.Context, lib *nccl.Library, id nccl.UniqueID) error {
	type result struct {
		nc  *nccl.Comm
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = c.dev.Do(func(*cuda.Ctx) error {
			var err error
			r.nc, err = lib.CommInitRank(c.size, id, c.rank)
			return err
		})
		done <- r
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return fmt.Errorf("ncclcomm: rank %d of %d: %w", c.rank, c.size, r.err)
		}
		c.nc = r.nc
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ncclcomm: rank %d of %d: ncclCommInitRank did not finish: %w", c.rank, c.size, context.Cause(ctx))
	}
}

// Rank implements comm.Comm.
func (c *Comm) Rank() int { return c.rank }

// Size implements comm.Comm.
func (c *Comm) Size() int { return c.size }

// Stats implements comm.Comm: calls, bytes and wall-clock seconds of the
// collectives that succeeded, from the call to its completion on the
// Comm's stream.
func (c *Comm) Stats() comm.Stats {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.stats
}

// Close implements comm.Comm: it finalizes and destroys the NCCL
// communicator (already gone after a failure, which aborted it), then the
// Comm's stream, event and barrier word. No collective may be pending.
// Close is idempotent.
func (c *Comm) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		failed := c.failure() != nil
		err := c.releaseNCCL(failed)
		if failed {
			err = nil // the abort's own outcome was the failure's business
		}
		c.closeErr = errors.Join(err, c.dev.Do(c.free))
	})
	return c.closeErr
}

// callDeadline is ctx's deadline, or now+def when it has none.
func callDeadline(ctx context.Context, def time.Duration) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(def)
}
