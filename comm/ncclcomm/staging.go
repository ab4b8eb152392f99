package ncclcomm

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cuda"
)

// NCCL moves device memory only. Buffers in host pools (the trainer's small
// bookkeeping collectives, an offloaded optimizer's partitions) are staged
// through device memory the Comm owns: copied in on the device thread just
// before the NCCL call, and out after the stream finished it. Collectives
// are issued one at a time, so one staging area serves every call; it
// grows to the largest call and is freed by Close.

// placed is where one argument of a collective lives for NCCL.
type placed struct {
	ptr  cuda.DevicePtr
	host []byte // non-nil: a host buffer staged at ptr
}

func isHost(b backend.Buffer) bool {
	return b.Pool() == backend.Host || b.Pool() == backend.HostPinned
}

// place maps the buffers of one collective to device addresses, staging
// the host ones in consecutive 256-byte-aligned slots.
func (c *Comm) place(bufs ...backend.Buffer) ([]placed, error) {
	need := 0
	for _, b := range bufs {
		checkBuffer(b)
		if isHost(b) {
			need += (b.Bytes() + 255) &^ 255
		}
	}
	if need > c.stageBytes {
		if c.stage != 0 {
			if err := c.dev.Free(c.stage); err != nil {
				return nil, err
			}
			c.stage, c.stageBytes = 0, 0
		}
		p, err := c.dev.Alloc(need)
		if err != nil {
			return nil, fmt.Errorf("ncclcomm: staging %d bytes of host buffers on the device: %w", need, err)
		}
		c.stage, c.stageBytes = p, need
	}
	out := make([]placed, len(bufs))
	off := 0
	for i, b := range bufs {
		if !isHost(b) {
			out[i].ptr = cuda.DevicePtr(b.Mem().Dev).Add(b.ByteOff())
			continue
		}
		out[i] = placed{ptr: c.stage.Add(off), host: b.Mem().Host[b.ByteOff() : b.ByteOff()+b.Bytes()]}
		off += (b.Bytes() + 255) &^ 255
	}
	return out, nil
}

// copyIn uploads the staged inputs; it runs on the device thread inside
// the issue of the NCCL call. A synchronous copy from pageable memory may
// return before its DMA reaches the device, and the Comm's stream does not
// synchronise with the legacy stream the copy runs on, so the stream
// waits for an event recorded after the copies.
func (c *Comm) copyIn(x *cuda.Ctx, ps ...placed) error {
	copied := false
	for _, p := range ps {
		if p.host != nil && len(p.host) > 0 {
			if err := x.CopyHtoD(p.ptr, p.host); err != nil {
				return err
			}
			copied = true
		}
	}
	if !copied {
		return nil
	}
	if err := x.RecordEvent(c.staged, 0); err != nil {
		return err
	}
	return x.StreamWaitEvent(c.stream, c.staged)
}

// copyOut downloads the staged outputs after the collective finished.
func (c *Comm) copyOut(err error, ps ...placed) error {
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.host != nil && len(p.host) > 0 {
			if err := c.dev.CopyDtoH(p.host, p.ptr); err != nil {
				return fmt.Errorf("ncclcomm: copy a staged result back to host memory: %w", err)
			}
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
