package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

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

// Unscaling by the loss scale and clipping in one multiply, ClipCoef/S,
// is the inverse of DeepSpeed ZeRO's combined scale.
func TestClipCoefIsDeepSpeedUnscaleAndClip(t *testing.T) {
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
		want := 1 / ref(norm*ls, ls, clip)
		if got := ClipCoef(norm, clip) / ls; math.Abs(got-want) > 1e-12*want {
			t.Fatalf("ClipCoef/lossScale = %.17g, DeepSpeed 1/combined = %.17g (norm %g, scale %g, clip %g)", got, want, norm, ls, clip)
		}
	}
}
