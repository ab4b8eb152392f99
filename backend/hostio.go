package backend

import (
	"encoding/binary"
	"fmt"
	"math"
)

// WriteF32 converts src to dst's dtype on the host (round-to-nearest-even for
// 16-bit floats, truncation toward zero for integers) and uploads it.
func WriteF32(be Backend, dst Buffer, src []float32) error {
	if len(src) != dst.Len() {
		return fmt.Errorf("write %s: %d values for %d elements", dst, len(src), dst.Len())
	}
	buf := make([]byte, dst.Bytes())
	for i, x := range src {
		switch dst.DType() {
		case F32:
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		case BF16:
			binary.LittleEndian.PutUint16(buf[2*i:], BF16FromF32(x))
		case F16:
			binary.LittleEndian.PutUint16(buf[2*i:], F16FromF32(x))
		case I32:
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(int32(x)))
		case U16:
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(x))
		}
	}
	return be.Upload(dst, buf)
}

// ReadF32 downloads src and widens it to float32.
func ReadF32(be Backend, src Buffer) ([]float32, error) {
	buf := make([]byte, src.Bytes())
	if err := be.Download(buf, src); err != nil {
		return nil, err
	}
	out := make([]float32, src.Len())
	for i := range out {
		switch src.DType() {
		case F32:
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		case BF16:
			out[i] = F32FromBF16(binary.LittleEndian.Uint16(buf[2*i:]))
		case F16:
			out[i] = F32FromF16(binary.LittleEndian.Uint16(buf[2*i:]))
		case I32:
			out[i] = float32(int32(binary.LittleEndian.Uint32(buf[4*i:])))
		case U16:
			out[i] = float32(binary.LittleEndian.Uint16(buf[2*i:]))
		}
	}
	return out, nil
}

// WriteI32 uploads int32 values (token ids, targets) into an I32 buffer.
func WriteI32(be Backend, dst Buffer, src []int32) error {
	if dst.DType() != I32 || len(src) != dst.Len() {
		return fmt.Errorf("write %s: %d int32 values", dst, len(src))
	}
	buf := make([]byte, 4*len(src))
	for i, x := range src {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(x))
	}
	return be.Upload(dst, buf)
}

// ReadI32 downloads an I32 buffer exactly.
func ReadI32(be Backend, src Buffer) ([]int32, error) {
	if src.DType() != I32 {
		return nil, fmt.Errorf("read %s as int32", src)
	}
	buf := make([]byte, src.Bytes())
	if err := be.Download(buf, src); err != nil {
		return nil, err
	}
	out := make([]int32, src.Len())
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return out, nil
}
