package backend

import (
	"fmt"
	"math"
)

// DType is the element type of a Buffer.
type DType uint8

// The element types gotrain stores. Floating types are computed in fp32 by
// every backend; 16-bit floats are only a storage format.
const (
	F32  DType = iota + 1 // IEEE binary32
	BF16                  // bfloat16: the top 16 bits of a binary32
	F16                   // IEEE binary16
	I32                   // token ids, targets
	U16                   // token ids as stored in shards
)

// Size is the number of bytes of one element.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case BF16, F16, U16:
		return 2
	}
	panic("backend: bad dtype")
}

// IsFloat reports whether d holds floating-point values.
func (d DType) IsFloat() bool { return d == F32 || d == BF16 || d == F16 }

func (d DType) String() string {
	switch d {
	case F32:
		return "fp32"
	case BF16:
		return "bf16"
	case F16:
		return "fp16"
	case I32:
		return "int32"
	case U16:
		return "uint16"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// ParseDType accepts the names DeepSpeed and PyTorch users write.
func ParseDType(s string) (DType, error) {
	switch s {
	case "fp32", "float32", "float", "f32":
		return F32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "fp16", "float16", "half", "f16":
		return F16, nil
	case "int32", "i32":
		return I32, nil
	case "uint16", "u16":
		return U16, nil
	}
	return 0, fmt.Errorf("unknown dtype %q (want fp32, bf16 or fp16)", s)
}

// BF16FromF32 rounds x to the nearest bfloat16, ties to even. NaN stays NaN
// (quiet, sign kept) instead of rounding into an infinity.
func BF16FromF32(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	// Add 0x7fff plus the lowest kept bit: rounds half to even.
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F32FromBF16 widens a bfloat16 exactly.
func F32FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F16FromF32 rounds x to the nearest IEEE binary16, ties to even, with
// subnormals, overflow to infinity and NaN kept.
func F16FromF32(x float32) uint16 {
	u := math.Float32bits(x)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23) & 0xff
	man := u & 0x7fffff
	switch {
	case exp == 0xff: // Inf or NaN
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp > 127+15: // overflow
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e <= 0 {
		// Subnormal half (or zero): shift the implicit-one mantissa right.
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		half := m >> shift
		rem := m & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, which is the right answer (up to Inf)
	}
	return sign | uint16(half)
}

// F32FromF16 widens a binary16 exactly.
func F32FromF16(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = man * 2^-24.
		f := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}
