package commtest

import (
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// precision is the number of significant bits of a float dtype.
func precision(dt backend.DType) int {
	switch dt {
	case backend.BF16:
		return 8
	case backend.F16:
		return 11
	}
	return 24
}

// roundTo is v as dt holds it: rounded to nearest, ties to even, for the
// float dtypes (computed here from the formats' definitions, not with the
// backend's conversions under test); integers are returned as they are.
func roundTo(dt backend.DType, v float64) float64 {
	switch dt {
	case backend.F32:
		return float64(float32(v)) // Go converts with IEEE round-to-nearest-even
	case backend.BF16:
		return roundBits(v, 8, -126, 0x1.fep127)
	case backend.F16:
		return roundBits(v, 11, -14, 65504)
	}
	return v
}

// roundBits rounds v to p significant bits with exponents down to emin
// (below it the step stays 2^(emin−p+1): subnormals), overflowing past
// maxFinite to infinity.
func roundBits(v float64, p, emin int, maxFinite float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	_, e := math.Frexp(math.Abs(v)) // |v| = f·2^e with f in [0.5, 1)
	step := math.Ldexp(1, max(e-1, emin)-(p-1))
	r := math.RoundToEven(v/step) * step
	if math.Abs(r) > maxFinite {
		return math.Copysign(math.Inf(1), v)
	}
	return r
}

// exactInputs returns n values of dt: k/64 for the float dtypes, with |k|
// as large as dt holds exactly (255 for bf16, 2047 for fp16, 4095 for
// fp32), so the sum of even two ranks' values needs one bit more than a
// 16-bit dtype has and the result's rounding is tested, while every
// partial sum stays exact in fp32; integers for I32 (±1000) and U16 (0 to
// 1000, so sums do not wrap).
func exactInputs(rng *rand.Rand, dt backend.DType, n int) []float64 {
	kmax := 4095
	switch dt {
	case backend.BF16:
		kmax = 255
	case backend.F16:
		kmax = 2047
	}
	v := make([]float64, n)
	for i := range v {
		switch dt {
		case backend.I32:
			v[i] = float64(rng.IntN(2001) - 1000)
		case backend.U16:
			v[i] = float64(rng.IntN(1001))
		default:
			v[i] = float64(rng.IntN(2*kmax+1)-kmax) / 64
		}
	}
	return v
}

// wideInputs returns n fp32 values of mixed sign and magnitudes from 2^-8
// to 2^8, whose sums round in fp32.
func wideInputs(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(math.Ldexp(rng.NormFloat64(), rng.IntN(17)-8)))
	}
	return v
}

// column is element i of every rank's input.
func column(ins [][]float64, i int) []float64 {
	c := make([]float64, len(ins))
	for r := range ins {
		c[r] = ins[r][i]
	}
	return c
}

// reducedOK reports whether got is op over col (one element of every
// rank's input) in dt, under the implementation's declared numerics, and
// the float64 value it was compared with.
func (o Options) reducedOK(got float64, col []float64, dt backend.DType, op comm.Op) (bool, float64) {
	n := float64(len(col))
	if op == comm.Max {
		want, nan := math.Inf(-1), false
		for _, v := range col {
			if math.IsNaN(v) {
				nan = true
				continue
			}
			want = math.Max(want, v)
		}
		if nan && !o.MaxIgnoresNaN {
			return math.IsNaN(got), math.NaN()
		}
		return got == want || (nan && math.IsNaN(got)), want
	}
	var sum, abs float64
	for _, v := range col {
		sum += v
		abs += math.Abs(v)
	}
	div := 1.0
	if op == comm.Avg {
		div = n
	}
	exact := sum / div
	if !dt.IsFloat() {
		want := math.Trunc(exact)
		return got == want, want
	}
	const u = 0x1p-24 // fp32's unit roundoff
	if !o.Approximate {
		if sumsExactly(col) {
			// Every fp32 partial sum is exact, whatever the order, so the
			// contract fixes every bit: one rounding to dt, after Avg's
			// fp32 product.
			fl := float32(sum)
			if op == comm.Avg {
				fl = float32(fl * (1 / float32(len(col))))
			}
			want := roundTo(dt, float64(fl))
			return got == want, want
		}
		// An fp32 sum of Size terms in any order, then Avg's product.
		tol := (n-1)*u*abs/div + 2*u*math.Abs(exact)
		return math.Abs(got-exact) <= tol, exact
	}
	// One unit in the last place of dt for each of Size roundings, on the
	// scale of the result and of the terms.
	ulp := math.Ldexp(1, 1-precision(dt))
	tol := ulp*(math.Abs(exact)+(n-1)*abs/div) + 4*u*abs/div
	return math.Abs(got-exact) <= tol, exact
}

// sumsExactly reports whether every partial sum of col, in any order, is
// exact in fp32: all values are multiples of the smallest one's lowest set
// bit, and the sum of their magnitudes needs at most 24 bits of it.
func sumsExactly(col []float64) bool {
	lsb, abs := math.MaxInt, 0.0
	for _, v := range col {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
		if v == 0 {
			continue
		}
		frac, exp := math.Frexp(math.Abs(v)) // |v| = frac·2^exp
		mant := uint64(math.Ldexp(frac, 53)) // an integer: |v| = mant·2^(exp−53)
		lsb = min(lsb, exp-53+bits.TrailingZeros64(mant))
		abs += math.Abs(v)
	}
	return abs == 0 || math.Ldexp(abs, -lsb) < 1<<24
}
