package model

import "math"

// RopeInvFreq returns the rotary embedding's HD/2 inverse frequencies as
// transformers computes them, in float32 arithmetic (their rounding is part
// of the model): inv_freq[j] = 1/θ^(2j/HD) from an integer arange, then the
// variant's scaling (modeling_rope_utils: _compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters, _compute_llama3_parameters).
// Every variant gotrain supports has attention_factor 1. The explicit
// float32 conversions keep each operation a separately rounded float32
// operation, as PyTorch runs it (Go may otherwise fuse a·b+c).
func RopeInvFreq(cfg Config) []float32 {
	d, r := cfg.HD, cfg.Rope
	theta := float32(r.Theta)
	f := make([]float32, d/2)
	for j := range f {
		e := float32(2*j) / float32(d)
		f[j] = float32(1) / powf(theta, e)
	}
	switch r.Scaling {
	case RopeLinear:
		factor := float32(r.Factor)
		for j := range f {
			f[j] /= factor
		}
	case RopeLlama3:
		// Wavelengths above orig/low_freq_factor are divided by factor,
		// those below orig/high_freq_factor kept, and the band between
		// interpolated; Python-float scalars enter PyTorch's float32
		// arithmetic rounded to float32.
		factor, lo := float32(r.Factor), float32(r.LowFreqFactor)
		orig := float32(r.OrigMaxT)
		loWave := float32(float64(r.OrigMaxT) / r.LowFreqFactor)
		hiWave := float32(float64(r.OrigMaxT) / r.HighFreqFactor)
		span := float32(r.HighFreqFactor - r.LowFreqFactor)
		twoPi := float32(2 * math.Pi)
		for j, inv := range f {
			wave := twoPi / inv
			scaled := inv
			if wave > loWave {
				scaled = inv / factor
			}
			smooth := float32(float32(orig/wave)-lo) / span
			a := float32(float32(float32(1)-smooth)*scaled) / factor
			b := float32(smooth * scaled)
			smoothed := float32(a + b)
			if !(wave < hiWave) && !(wave > loWave) {
				f[j] = smoothed
			} else {
				f[j] = scaled
			}
		}
	}
	return f
}

// powf is x^y rounded to float32, as a float32 pow returns it (the
// float64 power is exact to well under half a float32 ulp).
func powf(x, y float32) float32 { return float32(math.Pow(float64(x), float64(y))) }

// RopeTables returns cos and sin, F32 (T, HD/2), of the angles t·inv_freq[j]
// for positions t = 0..T-1, computed in float64 from the float32 inverse
// frequencies and rounded once: transformers takes them in float32
// (position·inv_freq rounded, then cos), which differs by about an ulp of
// the angle; the float64 table is the exact value of the model's
// definition.
func RopeTables(cfg Config, T int) (cos, sin []float32) {
	inv := RopeInvFreq(cfg)
	h := len(inv)
	cos, sin = make([]float32, T*h), make([]float32, T*h)
	for t := 0; t < T; t++ {
		for j, f := range inv {
			a := float64(t) * float64(f)
			cos[t*h+j], sin[t*h+j] = float32(math.Cos(a)), float32(math.Sin(a))
		}
	}
	return cos, sin
}
