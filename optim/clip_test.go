package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestGlobalNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, 1000)
	var direct float64
	for i := range x {
		x[i] = rng.NormFloat64()
		direct += x[i] * x[i]
	}
	direct = math.Sqrt(direct)
	// Partial sums of squares over uneven chunks, as partitions produce them.
	var parts []float64
	for lo := 0; lo < len(x); lo += 137 {
		var s float64
		for _, v := range x[lo:min(lo+137, len(x))] {
			s += v * v
		}
		parts = append(parts, s)
	}
	if got := GlobalNorm(parts...); math.Abs(got-direct) > 1e-12*direct {
		t.Errorf("GlobalNorm %.17g, direct %.17g", got, direct)
	}
	if GlobalNorm() != 0 || GlobalNorm(9, 16) != 5 {
		t.Errorf("GlobalNorm() = %g, GlobalNorm(9, 16) = %g; want 0, 5", GlobalNorm(), GlobalNorm(9, 16))
	}
}

func TestClipCoef(t *testing.T) {
	for _, tc := range []struct{ norm, clip, want float64 }{
		{5, 0, 1},              // clipping off
		{5, -1, 1},             // clipping off
		{0.5, 1, 1},            // below the threshold
		{1, 1, 1 / (1 + 1e-6)}, // at the threshold the 1e-6 already clips
		{4, 1, 1 / (4 + 1e-6)}, // clipped
		{0, 1, 1},              // zero gradients
		{10, 2.5, 2.5 / (10 + 1e-6)},
	} {
		// Go evaluates the constant wants exactly, so allow float64 rounding.
		if got := ClipCoef(tc.norm, tc.clip); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("ClipCoef(%g, %g) = %.17g, want %.17g", tc.norm, tc.clip, got, tc.want)
		}
	}
}

func TestCombinedScale(t *testing.T) {
	// DeepSpeed's unscale_and_clip_grads, transcribed.
	ref := func(scaledNorm, lossScale, clip float64) float64 {
		combined := lossScale
		if clip > 0 {
			c := (scaledNorm/lossScale + 1e-6) / clip
			if c < 1 {
				c = 1
			}
			combined = c * lossScale
		}
		return combined
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for range 200 {
		ls := math.Ldexp(1, rng.IntN(33))
		norm := math.Exp(rng.Float64()*8 - 4) // unscaled norm in [e^-4, e^4]
		clip := []float64{0, 0.5, 1, 5}[rng.IntN(4)]
		got := CombinedScale(norm*ls, ls, clip)
		if want := ref(norm*ls, ls, clip); math.Abs(got-want) > 1e-12*want {
			t.Fatalf("CombinedScale(%g, %g, %g) = %.17g, want %.17g", norm*ls, ls, clip, got, want)
		}
		// Unscale-then-clip in two multiplies gives the same gradient factor.
		if two := ClipCoef(norm, clip) / ls; math.Abs(1/got-two) > 1e-12*two {
			t.Fatalf("1/CombinedScale = %.17g, ClipCoef/lossScale = %.17g (norm %g, scale %g, clip %g)", 1/got, two, norm, ls, clip)
		}
	}
	if got := CombinedScale(123, 1024, 0); got != 1024 {
		t.Errorf("no clipping: %g, want the loss scale 1024", got)
	}
	if got := CombinedScale(2048, 1024, 1); math.Abs(got-1024*(2+1e-6)) > 1e-12 {
		t.Errorf("norm 2 clip 1 scale 1024: %.17g, want %.17g", got, 1024*(2+1e-6))
	}
}
