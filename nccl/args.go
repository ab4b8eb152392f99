package nccl

import (
	"fmt"

	"github.com/gotrain/gotrain/cuda"
)

// checkType refuses an unknown type, and bf16 on NCCL before 2.10.3, which
// would reject it with a bare ncclInvalidArgument.
func (c *Comm) checkType(op string, dt DataType) error {
	if dt.Size() == 0 {
		return fmt.Errorf("%w: %s: unknown data type %v", ErrInvalidArgument, op, dt)
	}
	if dt == Bfloat16 && !c.lib.version.AtLeast(2, 10, 3) {
		return fmt.Errorf("%w: %s: bfloat16 needs NCCL 2.10.3 or later, this is %v (%s)", ErrUnsupported, op, c.lib.version, c.lib.path)
	}
	return nil
}

func (c *Comm) checkOp(op string, r RedOp) error {
	if r < Sum || r > Avg {
		return fmt.Errorf("%w: %s: unknown reduction %v", ErrInvalidArgument, op, r)
	}
	if r == Avg && !c.lib.version.AtLeast(2, 10, 3) {
		return fmt.Errorf("%w: %s: the avg reduction needs NCCL 2.10.3 or later, this is %v (%s)", ErrUnsupported, op, c.lib.version, c.lib.path)
	}
	return nil
}

// checkBuffers refuses a negative count and a null buffer that would be
// read or written.
func checkBuffers(op string, count int, bufs ...cuda.DevicePtr) error {
	if count < 0 {
		return fmt.Errorf("%w: %s: count %d", ErrInvalidArgument, op, count)
	}
	if count > 0 {
		for _, b := range bufs {
			if b == 0 {
				return fmt.Errorf("%w: %s: null device buffer", ErrInvalidArgument, op)
			}
		}
	}
	return nil
}

// checkPeer refuses a root or peer that is not a rank of the communicator.
func (c *Comm) checkPeer(op, what string, r int) error {
	if r < 0 || r >= c.ranks {
		return fmt.Errorf("%w: %s: %s %d is not a rank of %d", ErrInvalidArgument, op, what, r, c.ranks)
	}
	return nil
}
