package optim

import "math"

// clipEps keeps the clip coefficient finite for a zero norm (PyTorch's and
// DeepSpeed's 1e-6).
const clipEps = 1e-6

// ClipCoef is the factor gradients are multiplied by for clipping:
// min(1, maxNorm/(norm+1e-6)) when maxNorm > 0 (DeepSpeed's
// gradient_clipping), and 1 when clipping is off (maxNorm ≤ 0). norm is of
// the unscaled gradients and must be finite: check overflow first.
//
// With fp16's loss scale S the gradients still carry S, and ClipCoef(norm,
// maxNorm)/S is the one multiply that unscales and clips them (package zero
// hands it to AdamW as GradScale): DeepSpeed ZeRO's unscale_and_clip_grads
// divides by the combined scale S·max(1, (norm+1e-6)/maxNorm) instead,
// the same factor.
func ClipCoef(norm, maxNorm float64) float64 {
	if maxNorm <= 0 {
		return 1
	}
	return math.Min(1, maxNorm/(norm+clipEps))
}
