package backend

import "math"

// Dropouter is implemented by backends with inverted dropout on a buffer,
// the op behind LoRA's lora_dropout; a model asks for it only when dropout
// is on, and says so when the backend lacks it.
type Dropouter interface {
	// Dropout: out[i] = inp[i]·DropoutScale(p) where DropoutKeep(seed, i,
	// DropoutThreshold(p)), else 0, over N elements (any float dtypes; out
	// may alias inp). The mask is a function of (seed, i) alone, the same on
	// every backend, so a backward pass applies the forward's mask by
	// calling Dropout again on the gradient with the same seed.
	Dropout(out, inp Buffer, p float32, seed uint64, N int)
}

// DropoutThreshold is the integer bound of keeping with probability 1−p:
// an element is dropped when its 32 random bits are below it (p·2³²,
// rounded up, at most 2³²−1). 0 ≤ p < 1.
func DropoutThreshold(p float32) uint32 {
	t := math.Ceil(float64(p) * (1 << 32))
	return uint32(min(max(t, 0), math.MaxUint32))
}

// DropoutScale is 1/(1−p) in fp32: kept elements are scaled by it, so the
// expectation is unchanged (PyTorch's inverted dropout).
func DropoutScale(p float32) float32 { return float32(1 / (1 - float64(p))) }

// DropoutBits is element i's 32 random bits under seed: the high half of
// SplitMix64's output at counter seed + (i+1)·φ (φ = 0x9E3779B97F4A7C15), a
// counter-based generator any backend computes in integer arithmetic
// without state.
func DropoutBits(seed uint64, i int64) uint32 {
	z := seed + uint64(i+1)*0x9E3779B97F4A7C15
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	z ^= z >> 31
	return uint32(z >> 32)
}

// DropoutKeep reports whether element i survives under seed and threshold.
func DropoutKeep(seed uint64, i int64, threshold uint32) bool {
	return DropoutBits(seed, i) >= threshold
}

// DropoutSeed mixes a base seed with indices (micro-batch,
// layer, projection, module, …) into one seed, so each use of dropout
// draws an independent mask.
func DropoutSeed(base uint64, idx ...int) uint64 {
	s := base
	for _, k := range idx {
		s = uint64(DropoutBits(s, int64(k)))<<32 | uint64(DropoutBits(s^0xD1B54A32D192ED03, int64(k)))
	}
	return s
}
