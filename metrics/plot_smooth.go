package metrics

import "math"

// DefaultSmoothing is TensorBoard's default scalar smoothing weight
// (its "scalarSmoothing" setting), which `gotrain plot` also uses.
const DefaultSmoothing = 0.6

// SmoothEMA returns TensorBoard's debiased exponential moving average of ys
// with weight w in [0, 1): last = w·last + (1−w)·y, shown as
// last / (1 − w^n) after n finite values, so the line starts at the first
// value instead of rising from zero. Non-finite values pass through
// unchanged and do not advance n; a constant series is returned as it is
// (TensorBoard does the same, so rounding never draws a wobble). W&B's
// "exponential moving average" smoothing is the same formula.
func SmoothEMA(ys []float64, w float64) []float64 {
	out := make([]float64, len(ys))
	copy(out, ys)
	if len(ys) == 0 || w <= 0 {
		return out
	}
	constant := true
	for _, y := range ys {
		if y != ys[0] {
			constant = false
			break
		}
	}
	if constant {
		return out
	}
	last, n := 0.0, 0
	for i, y := range ys {
		if !isFinite(y) {
			continue
		}
		last = last*w + (1-w)*y
		n++
		out[i] = last / (1 - math.Pow(w, float64(n)))
	}
	return out
}
