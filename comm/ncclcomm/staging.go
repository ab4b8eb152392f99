package ncclcomm

import (
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cuda"
)

// NCCL moves device memory only. Buffers in host pools (the trainer's small
// bookkeeping collectives, an offloaded optimizer's partitions) are staged
// through pinned host memory and device memory the Comm owns: the caller
// copies the inputs into the pinned block, async copies on the Comm's own
// stream move them to the device before the NCCL call and the results back
// after it, and the caller copies them out once the call's completion
// event fired. No copy touches the legacy NULL stream, so none waits for
// or holds up the compute stream. Collectives are issued one at a time, so
// one staging area serves every call; it grows to the largest call and is
// freed by Close.

// placed is where one argument of a collective lives for NCCL.
type placed struct {
	ptr  cuda.DevicePtr
	host []byte          // non-nil: a host buffer staged at ptr
	pin  cuda.HostBuffer // host's pinned copy, when host is not empty
}

func isHost(b backend.Buffer) bool {
	return b.Pool() == backend.Host || b.Pool() == backend.HostPinned
}

// place maps the buffers of one collective to device addresses, staging
// the host ones in consecutive 256-byte-aligned slots of the device and
// pinned staging blocks, and copies the host buffers into the pinned
// block (every one: an output's first bytes are its input in the in-place
// collectives, and copying an output-only buffer costs little).
func (c *Comm) place(bufs ...backend.Buffer) ([]placed, error) {
	need := 0
	for _, b := range bufs {
		checkBuffer(b)
		if isHost(b) {
			need += (b.Bytes() + 255) &^ 255
		}
	}
	if need > c.stageBytes {
		if err := c.freeStage(); err != nil {
			return nil, err
		}
		p, err := c.dev.Alloc(need)
		if err != nil {
			return nil, fmt.Errorf("ncclcomm: staging %d bytes of host buffers on the device: %w", need, err)
		}
		h, err := c.dev.AllocHost(need)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("ncclcomm: staging %d bytes of host buffers in pinned memory: %w", need, err), c.dev.Free(p))
		}
		c.stage, c.pinned, c.stageBytes = p, h, need
	}
	out := make([]placed, len(bufs))
	off := 0
	for i, b := range bufs {
		if !isHost(b) {
			out[i].ptr = cuda.DevicePtr(b.Mem().Dev).Add(b.ByteOff())
			continue
		}
		out[i] = placed{ptr: c.stage.Add(off), host: b.Mem().Host[b.ByteOff() : b.ByteOff()+b.Bytes()]}
		if len(out[i].host) > 0 {
			out[i].pin = c.pinned.Slice(off, len(out[i].host))
			copy(out[i].pin.Bytes(), out[i].host)
		}
		off += (b.Bytes() + 255) &^ 255
	}
	return out, nil
}

// freeStage releases the staging blocks (a larger call, Close).
func (c *Comm) freeStage() error {
	var err error
	if c.stage != 0 {
		err = c.dev.Free(c.stage)
	}
	if c.pinned.Len() > 0 {
		err = errors.Join(err, c.dev.FreeHost(c.pinned))
	}
	c.stage, c.pinned, c.stageBytes = 0, cuda.HostBuffer{}, 0
	return err
}

// copyIn queues the staged inputs' upload on the Comm's stream, ahead of
// the NCCL call; it runs on the device thread inside the call's issue.
func (c *Comm) copyIn(x *cuda.Ctx, ps ...placed) error {
	for _, p := range ps {
		if len(p.host) > 0 {
			if err := x.CopyHtoDAsync(p.ptr, p.pin, c.stream); err != nil {
				return err
			}
		}
	}
	return nil
}

// queueOut queues the staged outputs' download on the Comm's stream after
// the NCCL call whose error is err; the completion event is recorded after
// them.
func (c *Comm) queueOut(x *cuda.Ctx, err error, ps ...placed) error {
	if err != nil {
		return err
	}
	for _, p := range ps {
		if len(p.host) > 0 {
			if err := x.CopyDtoHAsync(p.pin, p.ptr, c.stream); err != nil {
				return fmt.Errorf("ncclcomm: queue a staged result's copy back to host memory: %w", err)
			}
		}
	}
	return nil
}

// copyOut hands the staged outputs to their host buffers once the call
// completed (err is its outcome).
func (c *Comm) copyOut(err error, ps ...placed) error {
	if err != nil {
		return err
	}
	for _, p := range ps {
		if len(p.host) > 0 {
			copy(p.host, p.pin.Bytes())
		}
	}
	return nil
}

// checkBuffer refuses what no collective can use.
func checkBuffer(b backend.Buffer) {
	if b.IsNil() {
		panic("ncclcomm: collective on the zero Buffer")
	}
	if b.Mem().Freed {
		panic("ncclcomm: collective on a freed Buffer")
	}
	if !isHost(b) && b.Mem().Dev == 0 && b.Len() > 0 {
		panic("ncclcomm: collective on a device Buffer without device memory")
	}
}
