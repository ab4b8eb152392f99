package backend

import (
	"math"
	"testing"
)

// TestDropoutBits checks the generator against SplitMix64's published
// first output from state 0 (0xE220A8397B1DCDAF, whose high half element 0
// of seed 0 takes) and the threshold and scale at their edges.
func TestDropoutBits(t *testing.T) {
	if got := DropoutBits(0, 0); got != 0xE220A839 {
		t.Errorf("DropoutBits(0, 0) = %#x, want SplitMix64's first output's high half 0xe220a839", got)
	}
	for _, c := range []struct {
		p    float32
		want uint32
	}{{0, 0}, {0.5, 1 << 31}, {0.25, 1 << 30}, {math.Nextafter32(1, 0), math.MaxUint32 - 255}, {1e-12, 1}} {
		if got := DropoutThreshold(c.p); got != c.want {
			t.Errorf("DropoutThreshold(%g) = %d, want %d", c.p, got, c.want)
		}
	}
	if DropoutScale(0) != 1 || DropoutScale(0.5) != 2 || DropoutScale(0.2) != 1.25 {
		t.Errorf("DropoutScale: %g %g %g, want 1 2 1.25", DropoutScale(0), DropoutScale(0.5), DropoutScale(0.2))
	}
	// Seeds mixed from different indices give different masks.
	a, b := DropoutSeed(7, 1, 2), DropoutSeed(7, 2, 1)
	same := 0
	for i := range int64(1000) {
		if DropoutKeep(a, i, 1<<31) == DropoutKeep(b, i, 1<<31) {
			same++
		}
	}
	if same < 400 || same > 600 {
		t.Errorf("masks of DropoutSeed(7,1,2) and (7,2,1) agree on %d of 1000 elements at p 0.5, want about 500", same)
	}
}
