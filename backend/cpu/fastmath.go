package cpu

import "math"

// exp32 returns e^x in float32 within about 2 ulp, for the softmax and GELU
// inner loops where float64 math.Exp would dominate the op's time.
// Arguments above 88.3 are clamped to 88.3 (so e^x stays finite and callers
// never see Inf·0 = NaN), below -87.3 the result is 0; NaN propagates.
//
// Method: x = n·ln2 + r with |r| ≤ ln2/2 (Cody–Waite split of ln2), e^r by
// its degree-7 Taylor polynomial (truncation error < 2e-7 relative), times
// 2^n built in the exponent bits.
func exp32(x float32) float32 {
	if x > expMaxArg {
		x = expMaxArg
	}
	if x < expMinArg {
		return 0
	}
	nf := (x*log2e + expRound) - expRound
	r := x - nf*ln2Hi - nf*ln2Lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(int32(nf)+127)<<23)
}

const (
	log2e     = 1.44269504088896341
	ln2Hi     = 0.693359375 // ln2 rounded to 10 bits so n·ln2Hi is exact
	ln2Lo     = -2.12194440e-4
	expRound  = 12582912 // 1.5·2^23: adding and subtracting rounds to an integer
	expMaxArg = 88.3
	expMinArg = -87.3
)

// expInPlaceScalar sets v[i] = exp32(v[i]) for every element. The body of
// exp32 is written out here because Go does not inline it, and a call per
// element costs as much as the arithmetic in the softmax and GELU loops;
// TestExpInPlace keeps the two bit-identical. expInPlace (exp_*.go) runs a
// vector version of the same arithmetic where the build and CPU allow.
func expInPlaceScalar(v []float32) {
	for i, x := range v {
		if x > expMaxArg {
			x = expMaxArg
		}
		if x < expMinArg {
			v[i] = 0
			continue
		}
		nf := (x*log2e + expRound) - expRound
		r := x - nf*ln2Hi - nf*ln2Lo
		p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
		v[i] = p * math.Float32frombits(uint32(int32(nf)+127)<<23)
	}
}

// softmaxRowScalar sets p = softmax(x) and returns max(x) and Σe^(x−max)
// (accumulated in float64) for the loss. len(p) == len(x) > 0.
func softmaxRowScalar(p, x []float32) (m float32, sum float64) {
	m, sum = expRowScalar(p, x)
	inv := float32(1 / sum)
	p = p[:len(x)]
	for j := range p {
		p[j] *= inv
	}
	return m, sum
}

// expRowScalar is softmaxRowScalar without the normalisation: p =
// e^(x−max), unscaled.
func expRowScalar(p, x []float32) (m float32, sum float64) {
	p = p[:len(x)]
	m = x[0]
	for _, xi := range x {
		if xi > m { // not the max builtin: its NaN and ±0 rules cost a branch maze
			m = xi
		}
	}
	for j, xi := range x {
		p[j] = xi - m
	}
	expInPlaceScalar(p)
	for _, e := range p {
		sum += float64(e)
	}
	return m, sum
}
