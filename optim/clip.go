package optim

import "math"

// clipEps keeps the clip coefficient finite for a zero norm (PyTorch's and
// DeepSpeed's 1e-6).
const clipEps = 1e-6

// GlobalNorm is the L2 norm over all parameters' gradients from their
// partial sums of squares (per tensor, per partition or per rank):
// sqrt(Σ sumSquares).
func GlobalNorm(sumSquares ...float64) float64 {
	var s float64
	for _, v := range sumSquares {
		s += v
	}
	return math.Sqrt(s)
}

// ClipCoef is the factor gradients are multiplied by for clipping:
// min(1, maxNorm/(norm+1e-6)) when maxNorm > 0 (DeepSpeed's
// gradient_clipping), and 1 when clipping is off (maxNorm ≤ 0). norm is of
// the unscaled gradients and must be finite: check overflow first.
func ClipCoef(norm, maxNorm float64) float64 {
	if maxNorm <= 0 {
		return 1
	}
	return math.Min(1, maxNorm/(norm+clipEps))
}

// CombinedScale is DeepSpeed ZeRO's unscale+clip divisor for fp16
// (unscale_and_clip_grads): the gradients, still multiplied by lossScale,
// are divided by
//
//	combined = lossScale · max(1, (scaledNorm/lossScale + 1e-6)/maxNorm)
//
// (just lossScale when maxNorm ≤ 0), where scaledNorm is the global norm of
// the scaled gradients. So 1/combined = ClipCoef(scaledNorm/lossScale,
// maxNorm)/lossScale: unscaling and clipping in one multiply, which is what
// backend.AdamWParams.GradScale takes. Use lossScale = 1 without fp16.
//
// lossScale must be the scale the loss was multiplied by (LossScaler.Scale
// before Update). DeepSpeed's ZeRO step reads it after updating the scaler,
// so on a step where the scale doubles it divides by twice the scale used;
// that slip is not reproduced.
func CombinedScale(scaledNorm, lossScale, maxNorm float64) float64 {
	if maxNorm <= 0 {
		return lossScale
	}
	return lossScale * math.Max(1, (scaledNorm/lossScale+clipEps)/maxNorm)
}
