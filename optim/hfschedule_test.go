package optim

import (
	"math"
	"testing"
)

// TestHFScheduleMatchesTransformers: the learning rate of each optimizer
// step equals what transformers' LambdaLR schedules give (λ(0) on the first
// step, λ(k−1) on step k), worked out by hand from
// transformers/optimization.py for small W and T.
func TestHFScheduleMatchesTransformers(t *testing.T) {
	cos := func(x float64) float64 { return 0.5 * (1 + math.Cos(math.Pi*x)) }
	for _, tc := range []struct {
		name          string
		warmup, total int
		want          []float64 // λ for steps 1, 2, …
	}{
		// W=2, T=5: 0, 1/2, then (5−n)/3 for n = 2..5, then 0 past the end.
		{"linear", 2, 5, []float64{0, 0.5, 1, 2.0 / 3, 1.0 / 3, 0, 0}},
		{"linear", 0, 4, []float64{1, 0.75, 0.5, 0.25, 0}},
		// W=1, T=5: 0, then half a cosine over the 4 decay steps; past T
		// it rises again, as transformers' does.
		{"cosine", 1, 5, []float64{0, 1, cos(0.25), cos(0.5), cos(0.75), 0, cos(1.25)}},
		{"constant_with_warmup", 3, 10, []float64{0, 1.0 / 3, 2.0 / 3, 1, 1, 1}},
		// get_scheduler gives "constant" no warmup.
		{"constant", 3, 10, []float64{1, 1, 1, 1}},
	} {
		s, err := NewHFSchedule(tc.name, tc.warmup, tc.total)
		if err != nil {
			t.Fatal(err)
		}
		const base = 0.01
		for k, w := range tc.want {
			if got := s.LR(base); math.Abs(got-base*w) > 1e-15 {
				t.Errorf("%s W=%d T=%d step %d: lr %.17g, want %.17g", tc.name, tc.warmup, tc.total, k+1, got, base*w)
			}
			s.Step()
		}
	}
	if _, err := NewHFSchedule("polynomial", 0, 10); err == nil {
		t.Error("polynomial accepted")
	}
}

// TestHFScheduleResumes: a schedule restored to a checkpoint's
// last_batch_iteration continues with the rates of an uninterrupted one.
func TestHFScheduleResumes(t *testing.T) {
	a, _ := NewHFSchedule("cosine", 3, 12)
	for range 5 {
		a.Step()
	}
	b, _ := NewHFSchedule("cosine", 3, 12)
	if err := b.Restore(a.State()); err != nil {
		t.Fatal(err)
	}
	for k := range 8 {
		if a.LR(1) != b.LR(1) {
			t.Fatalf("step %d after resume: %g vs %g", k, b.LR(1), a.LR(1))
		}
		a.Step()
		b.Step()
	}
}
