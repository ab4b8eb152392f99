package data

import (
	"math"
	"testing"
)

func TestValSplit(t *testing.T) {
	valIdx := func(f float64, n int64) []int64 {
		s := newValSplit(f)
		var out []int64
		for i := range n {
			if s.isVal(i) {
				out = append(out, i)
			}
		}
		return out
	}
	eq := func(a, b []int64) bool {
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
		return true
	}
	for _, tc := range []struct {
		f    float64
		n    int64
		want []int64
	}{
		{0.1, 1, nil},
		{0.1, 2, []int64{1}},
		{0.001, 2, []int64{1}},
		{0.1, 22, []int64{1, 11, 21}},
		{0.25, 10, []int64{1, 5, 9}},
		{0.5, 7, []int64{1, 3, 5}},
		{0, 100, nil},
	} {
		if got := valIdx(tc.f, tc.n); !eq(got, tc.want) {
			t.Errorf("F=%v n=%d: val documents %v, want %v", tc.f, tc.n, got, tc.want)
		}
	}
	// Count: ⌈(n−1)·F⌉, spread so no window of ⌈1/F⌉ documents lacks one.
	for _, f := range []float64{0.01, 0.02, 0.1, 0.3, 0.9} {
		for _, n := range []int64{2, 3, 10, 99, 1000} {
			got := valIdx(f, n)
			if want := int(math.Ceil(float64(n-1)*f - 1e-9)); len(got) != want {
				t.Errorf("F=%v n=%d: %d val documents, want %d", f, n, len(got), want)
			}
			gap := int64(math.Ceil(1/f - 1e-9))
			for i := 1; i < len(got); i++ {
				if got[i]-got[i-1] > gap {
					t.Errorf("F=%v: val documents %d and %d are %d apart, more than %d", f, got[i-1], got[i], got[i]-got[i-1], gap)
				}
			}
		}
	}
}
