package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
)

// packArgs lays kernel arguments out in one block, each at an offset
// aligned to its own size as a C struct would, and returns the block and
// the offsets (as C size_t, which is uint64 on the 64-bit platforms CUDA
// supports).
func packArgs(args []any) (block []byte, offs []uint64, err error) {
	put := func(size int, write func(b []byte)) {
		for len(block)%size != 0 {
			block = append(block, 0)
		}
		offs = append(offs, uint64(len(block)))
		var tmp [8]byte
		write(tmp[:size])
		block = append(block, tmp[:size]...)
	}
	le := binary.NativeEndian
	for i, a := range args {
		switch v := a.(type) {
		case DevicePtr:
			put(8, func(b []byte) { le.PutUint64(b, uint64(v)) })
		case int8:
			put(1, func(b []byte) { b[0] = byte(v) })
		case uint8:
			put(1, func(b []byte) { b[0] = v })
		case int16:
			put(2, func(b []byte) { le.PutUint16(b, uint16(v)) })
		case uint16:
			put(2, func(b []byte) { le.PutUint16(b, v) })
		case int32:
			put(4, func(b []byte) { le.PutUint32(b, uint32(v)) })
		case uint32:
			put(4, func(b []byte) { le.PutUint32(b, v) })
		case int64:
			put(8, func(b []byte) { le.PutUint64(b, uint64(v)) })
		case uint64:
			put(8, func(b []byte) { le.PutUint64(b, v) })
		case float32:
			put(4, func(b []byte) { le.PutUint32(b, math.Float32bits(v)) })
		case float64:
			put(8, func(b []byte) { le.PutUint64(b, math.Float64bits(v)) })
		default:
			return nil, nil, fmt.Errorf("argument %d has type %T; want DevicePtr or a sized integer or float", i, a)
		}
	}
	return block, offs, nil
}
