package commtest

import (
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// The suite's rounding is its own, from the formats' definitions; these
// cases are worked by hand from them.
func TestRoundTo(t *testing.T) {
	for _, c := range []struct {
		dt       backend.DType
		in, want float64
	}{
		{backend.BF16, 1 + 0x1p-8, 1},                     // a tie: to the even neighbour, 1
		{backend.BF16, 1 + 3*0x1p-8, 1 + 0x1p-6},          // a tie: to the even neighbour, 1+2^-6
		{backend.BF16, 1 + 0x1p-8 + 0x1p-20, 1 + 0x1p-7},  // just past the tie
		{backend.BF16, -257.0 / 64, -256.0 / 64},          // 9 bits, a tie to even
		{backend.BF16, 0x1p-133, 0x1p-133},                // the smallest subnormal
		{backend.BF16, 0x1.ffp127, math.Inf(1)},           // past the largest finite value
		{backend.F16, 2049, 2048},                         // a tie to even
		{backend.F16, 2051, 2052},                         // a tie to even, upwards
		{backend.F16, 0x1p-24 * 1.5, 0x1p-23},             // subnormals step by 2^-24: a tie to even
		{backend.F16, 65519, 65504},                       // below the overflow threshold
		{backend.F16, 65520, math.Inf(1)},                 // at it
		{backend.F32, 1 + 0x1p-24, 1},                     // a tie to even
		{backend.F32, 1 + 0x1p-24 + 0x1p-40, 1 + 0x1p-23}, // past it
		{backend.I32, 7, 7},                               // integers pass through
	} {
		if got := roundTo(c.dt, c.in); got != c.want {
			t.Errorf("roundTo(%s, %v) = %v, want %v", c.dt, c.in, got, c.want)
		}
	}
}

// Every finite binary16 bit pattern decodes to a value that encodes back to
// it, and the decoded values are exactly those roundTo keeps.
func TestF16Codec(t *testing.T) {
	for h := range uint32(1 << 16) {
		v := f16Value(uint16(h))
		if math.IsNaN(v) {
			continue
		}
		if got := f16Bits(v); got != uint16(h) {
			t.Fatalf("f16Bits(f16Value(%#04x) = %v) = %#04x", h, v, got)
		}
		if roundTo(backend.F16, v) != v {
			t.Fatalf("roundTo(fp16, %v) changed a binary16 value", v)
		}
	}
}

func TestSumsExactly(t *testing.T) {
	for _, c := range []struct {
		col  []float64
		want bool
	}{
		{[]float64{1.5, -0.25, 3}, true},
		{[]float64{0, 0}, true},
		{[]float64{0x1p23, 0.5}, false}, // 2^23 + 0.5 needs 25 bits
		{[]float64{0x1p23, 1}, true},
		{[]float64{1, 0x1p-30}, false},
		{[]float64{math.NaN(), 1}, false},
	} {
		if got := sumsExactly(c.col); got != c.want {
			t.Errorf("sumsExactly(%v) = %v, want %v", c.col, got, c.want)
		}
	}
}

// The contract's numerics fix every bit where the fp32 sum is exact; an
// Approximate implementation may be an ulp or so away, and no more.
func TestReducedOK(t *testing.T) {
	strict, loose := Options{}, Options{Approximate: true}
	col := []float64{1, 1.0 / 64, 0} // sum 65/64, needs 7 bits: exact in bf16
	if ok, _ := strict.reducedOK(65.0/64, col, backend.BF16, comm.Sum); !ok {
		t.Error("the exact bf16 sum refused")
	}
	// Avg: fl32(65/64 · fl32(1/3)) = 0.35416666..., rounded once to bf16.
	want := roundTo(backend.BF16, float64(float32(float32(65.0/64)*(1/float32(3)))))
	if ok, _ := strict.reducedOK(want, col, backend.BF16, comm.Avg); !ok {
		t.Errorf("the contract's bf16 average %v refused", want)
	}
	next := want + 0x1p-10 // one bf16 ulp above, in [0.25, 0.5)
	if ok, _ := strict.reducedOK(next, col, backend.BF16, comm.Avg); ok {
		t.Errorf("an average one ulp off (%v) accepted under the contract's numerics", next)
	}
	if ok, _ := loose.reducedOK(next, col, backend.BF16, comm.Avg); !ok {
		t.Errorf("an average one ulp off (%v) refused under Approximate", next)
	}
	if ok, _ := loose.reducedOK(want+0x1p-6, col, backend.BF16, comm.Avg); ok {
		t.Errorf("an average 16 ulps off accepted under Approximate")
	}
	nan := []float64{2, math.NaN()}
	if ok, _ := strict.reducedOK(2, nan, backend.F32, comm.Max); ok {
		t.Error("a Max that dropped the NaN accepted")
	}
	if ok, _ := (Options{MaxIgnoresNaN: true}).reducedOK(2, nan, backend.F32, comm.Max); !ok {
		t.Error("a Max that dropped the NaN refused under MaxIgnoresNaN")
	}
}
