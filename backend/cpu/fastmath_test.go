package cpu

import (
	"math"
	"testing"
)

// TestExp32 checks exp32 against float64 math.Exp over its whole range on a
// dense grid, plus the clamped and special arguments.
func TestExp32(t *testing.T) {
	worst := 0.0
	for x := float32(-87.3); x <= 88.3; x += 0.00731 {
		want := math.Exp(float64(x))
		rel := math.Abs(float64(exp32(x))-want) / want
		worst = max(worst, rel)
	}
	// float32 rounding alone is 6e-8; the polynomial adds < 2e-7.
	if worst > 3e-7 {
		t.Errorf("exp32 worst relative error %.3g, want ≤ 3e-7", worst)
	}
	if got := exp32(-100); got != 0 {
		t.Errorf("exp32(-100) = %g, want 0", got)
	}
	if got := exp32(float32(math.Inf(-1))); got != 0 {
		t.Errorf("exp32(-Inf) = %g, want 0", got)
	}
	if got := exp32(1000); math.IsInf(float64(got), 0) || got < 1e38 {
		t.Errorf("exp32(1000) = %g, want the finite clamp near 2e38", got)
	}
	if got := exp32(float32(math.NaN())); got == got {
		t.Errorf("exp32(NaN) = %g, want NaN", got)
	}
}

// TestExpInPlace requires the hand-inlined loop to agree with exp32 bit for
// bit, including the clamps and NaN.
func TestExpInPlace(t *testing.T) {
	var in []float32
	for x := float32(-100); x <= 100; x += 0.0123 {
		in = append(in, x)
	}
	in = append(in, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0, -0.0)
	v := append([]float32(nil), in...)
	expInPlace(v)
	for i, x := range in {
		want := exp32(x)
		if math.Float32bits(v[i]) != math.Float32bits(want) && !(v[i] != v[i] && want != want) {
			t.Fatalf("expInPlace(%g) = %g, exp32 = %g", x, v[i], want)
		}
	}
}
