package trainer

import (
	"math"
	"slices"
	"testing"
)

// TestSyntheticBatches: ids stay below the vocabulary, targets are the
// inputs shifted by one, the same seed and rank give the same stream,
// ranks differ, and the ids are close to uniform (a chi-square test
// against the uniform distribution at the 0.1% level).
func TestSyntheticBatches(t *testing.T) {
	const V, n = 7, 6000
	a, err := NewSyntheticBatches(3, 0, V)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewSyntheticBatches(3, 0, V)
	c, _ := NewSyntheticBatches(3, 1, V)
	in, tg := make([]int32, n), make([]int32, n)
	in2, tg2 := make([]int32, n), make([]int32, n)
	in3, tg3 := make([]int32, n), make([]int32, n)
	counts := make([]float64, V)
	for range 2 {
		a.Next(in, tg)
		b.Next(in2, tg2)
		c.Next(in3, tg3)
		if !slices.Equal(in, in2) || !slices.Equal(tg, tg2) {
			t.Fatal("same seed and rank, different streams")
		}
		if slices.Equal(in, in3) {
			t.Fatal("ranks 0 and 1 drew the same stream")
		}
		if !slices.Equal(in[1:], tg[:n-1]) {
			t.Fatal("targets are not the inputs shifted by one")
		}
		for _, id := range append(in, tg[n-1]) {
			if id < 0 || id >= V {
				t.Fatalf("id %d outside [0, %d)", id, V)
			}
			counts[id]++
		}
	}
	total := 0.0
	for _, k := range counts {
		total += k
	}
	chi := 0.0
	for _, k := range counts {
		e := total / V
		chi += (k - e) * (k - e) / e
	}
	// χ²(6 degrees of freedom) exceeds 22.46 with probability 0.001.
	if chi > 22.46 || math.IsNaN(chi) {
		t.Errorf("χ² = %.1f over %v: not uniform", chi, counts)
	}
	if _, err := NewSyntheticBatches(1, 0, 1); err == nil {
		t.Error("a vocabulary of 1 was accepted")
	}
}
