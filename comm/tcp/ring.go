package tcp

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// The ring moves data r → r+1. A message of count elements is cut into Size
// chunks, chunk i being elements [bounds(i), bounds(i+1)); each chunk
// travels in segments of at most Comm.seg bytes. Sender and receiver derive
// the same segmentation from the same arguments, so frames carry no
// offsets.

func (c *Comm) next() *peer { return c.peers[(c.rank+1)%c.size] }
func (c *Comm) prev() *peer { return c.peers[(c.rank+c.size-1)%c.size] }

// mod is i modulo n, in [0, n).
func mod(i, n int) int { return ((i % n) + n) % n }

// forEachSegment calls f with the byte range of each segment of chunk i of
// data, whose elements are esz bytes, until f fails.
func (c *Comm) forEachSegment(data []byte, esz int, bounds func(int) int, i int, f func(seg []byte) error) error {
	lo, hi := bounds(i)*esz, bounds(i+1)*esz
	step := c.seg / esz * esz
	for off := lo; off < hi; off += step {
		if err := f(data[off:min(off+step, hi)]); err != nil {
			return err
		}
	}
	return nil
}

// ringReduceScatter leaves in chunk Rank of work (elements of wire type wt)
// the reduction of that chunk over every rank. At step s rank r receives
// chunk r−s−2 from r−1, folds its own values in, and (before the last step)
// forwards each segment to r+1 as soon as it is reduced. Chunk i therefore
// starts at rank i+1 and is reduced in ring order, ending at its owner i:
// a fixed order, so the result is deterministic.
func (cl *call) ringReduceScatter(work []byte, wt backend.DType, bounds func(int) int, op comm.Op) error {
	c := cl.c
	n, r, esz := c.size, c.rank, wt.Size()
	next, prev := c.next(), c.prev()
	c.forEachSegment(work, esz, bounds, mod(r-1, n), func(seg []byte) error {
		cl.send(next, seg)
		return nil
	})
	for s := range n - 1 {
		forward := s < n-2
		err := c.forEachSegment(work, esz, bounds, mod(r-s-2, n), func(seg []byte) error {
			in, err := cl.recv(prev, len(seg), nil)
			if err != nil {
				return err
			}
			reduceInto(seg, in, wt, op)
			prev.release(in)
			if forward {
				cl.send(next, seg)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ringAllGather fills every chunk of data from its owner; chunk Rank must
// already hold this rank's part. At step s rank r receives chunk r−s−1 from
// r−1 and, before the last step, forwards each segment as it arrives.
func (cl *call) ringAllGather(data []byte, esz int, bounds func(int) int) error {
	c := cl.c
	n, r := c.size, c.rank
	next, prev := c.next(), c.prev()
	c.forEachSegment(data, esz, bounds, r, func(seg []byte) error {
		cl.send(next, seg)
		return nil
	})
	for s := range n - 1 {
		forward := s < n-2
		err := c.forEachSegment(data, esz, bounds, mod(r-s-1, n), func(seg []byte) error {
			in, err := cl.recv(prev, len(seg), nil)
			if err != nil {
				return err
			}
			copy(seg, in)
			prev.release(in)
			if forward {
				cl.send(next, seg)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ringBroadcast pipelines data from root around the ring: each rank
// forwards a segment as soon as it has it, except the rank before root.
func (cl *call) ringBroadcast(data []byte, esz, root int) error {
	c := cl.c
	n := c.size
	pos := mod(c.rank-root, n)
	next, prev := c.next(), c.prev()
	whole := func(i int) int { return i * (len(data) / esz) } // one chunk: the message
	return c.forEachSegment(data, esz, whole, 0, func(seg []byte) error {
		if pos != 0 {
			in, err := cl.recv(prev, len(seg), nil)
			if err != nil {
				return err
			}
			copy(seg, in)
			prev.release(in)
		}
		if pos != n-1 {
			cl.send(next, seg)
		}
		return nil
	})
}
