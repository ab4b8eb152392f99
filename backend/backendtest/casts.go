package backendtest

import (
	"math"
	"math/big"
)

// RefBF16 is x rounded to the nearest bfloat16 value (ties to even), derived
// independently of the bit trick backends use: normal values are rounded to
// 8 significant bits with math/big, values below the smallest normal
// (2^-126) to a multiple of the subnormal step 2^-133, and results beyond the
// largest finite bfloat16 become infinite. NaN maps to NaN.
func RefBF16(x float32) float32 { return refRound(x, 8, -126, 0x1.fep127) }

// RefF16 is x rounded to the nearest IEEE binary16 value (ties to even) the
// same way: 11 significant bits, subnormal step 2^-24 below 2^-14, overflow
// to infinity above 65504.
func RefF16(x float32) float32 { return refRound(x, 11, -14, 65504) }

// refRound rounds x to prec significant bits with exponent floor minExp
// (smallest normal 2^minExp, subnormal step 2^(minExp-prec+1)) and largest
// finite value maxFinite.
func refRound(x float32, prec uint, minExp int, maxFinite float64) float32 {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) || f == 0 {
		return x
	}
	var r float64
	if math.Abs(f) < math.Ldexp(1, minExp) {
		step := math.Ldexp(1, minExp-int(prec)+1)
		r = math.Copysign(math.RoundToEven(f/step)*step, f)
	} else {
		bf := new(big.Float).SetPrec(prec).SetMode(big.ToNearestEven).SetFloat64(f)
		r, _ = bf.Float64()
	}
	if math.Abs(r) > maxFinite {
		r = math.Copysign(math.Inf(1), f)
	}
	return float32(r)
}

// RefDecodeF16 is the value of binary16 bits h: (−1)^s·2^(e−15)·(1+m/1024)
// for normal numbers, (−1)^s·m·2^−24 for subnormals, Inf/NaN for e = 31.
func RefDecodeF16(h uint16) float32 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>10) & 0x1f
	m := float64(h & 0x3ff)
	switch {
	case e == 31 && m == 0:
		return float32(math.Inf(int(s)))
	case e == 31:
		return float32(math.Copysign(math.NaN(), s))
	case e == 0:
		return float32(s * math.Ldexp(m, -24))
	}
	return float32(s * math.Ldexp(1+m/1024, e-15))
}

// RefDecodeBF16 is the value of bfloat16 bits h: they are the high half of a
// binary32, so the value is (−1)^s·2^(e−127)·(1+m/128), m·2^−133 when e = 0.
func RefDecodeBF16(h uint16) float32 {
	s := 1.0
	if h&0x8000 != 0 {
		s = -1
	}
	e := int(h>>7) & 0xff
	m := float64(h & 0x7f)
	switch {
	case e == 255 && m == 0:
		return float32(math.Inf(int(s)))
	case e == 255:
		return float32(math.Copysign(math.NaN(), s))
	case e == 0:
		return float32(s * math.Ldexp(m, -133))
	}
	return float32(s * math.Ldexp(1+m/128, e-127))
}
