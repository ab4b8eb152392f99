package model

import (
	"fmt"
	"math"
)

// Weights are checked for NaN and ±Inf as they are read: a damaged file,
// or one saved from a run that diverged, otherwise loads silently and
// fails step 1 with a non-finite loss that reads like a learning-rate
// problem.

// countNonFinite returns the index of the first NaN or ±Inf in v (-1 when
// there is none) and how many v holds.
func countNonFinite(v []float32) (first, count int) {
	first = -1
	for i, x := range v {
		if f := float64(x); math.IsNaN(f) || math.IsInf(f, 0) {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	return first, count
}

// checkFinite fails when v, elements [lo, lo+len(v)) of tensor name in the
// file where, holds a non-finite value, naming the tensor and the first.
func checkFinite(where, name string, shape []int, v []float32, lo int) error {
	first, count := countNonFinite(v)
	if first < 0 {
		return nil
	}
	more := ""
	if count > 1 {
		more = fmt.Sprintf(" (and %d more non-finite values in the elements read)", count-1)
	}
	return fmt.Errorf("weights %s: tensor %s (shape %v) holds %v at element %d%s: the file is damaged or was saved from a run that diverged, and training from it fails at step 1 whatever the learning rate; use weights saved before the divergence, or download the model again",
		where, name, shape, v[first], lo+first, more)
}
