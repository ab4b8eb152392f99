package optim

import (
	"errors"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// fusedAdam is FusedAdam's defaults (lr 1e-3, betas (0.9, 0.999), eps
// 1e-8, weight_decay 0, adam_w_mode true), the base the tests vary.
func fusedAdam() AdamWConfig {
	return AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, AdamWMode: true}
}

func TestAdamWValidate(t *testing.T) {
	ok := fusedAdam()
	ok.WeightDecay = 0.1
	if err := ok.Validate(); err != nil {
		t.Errorf("AdamW with weight decay: %v", err)
	}
	l2 := ok
	l2.AdamWMode = false
	if err := l2.Validate(); !errors.Is(err, ErrAdamL2) {
		t.Errorf("adam_w_mode false with weight decay: err %v, want ErrAdamL2", err)
	}
	l2.WeightDecay = 0 // L2 with no decay is the same update as AdamW
	if err := l2.Validate(); err != nil {
		t.Errorf("adam_w_mode false without weight decay: %v", err)
	}
	for name, mut := range map[string]func(*AdamWConfig){
		"lr < 0":    func(c *AdamWConfig) { c.LR = -1 },
		"beta1 = 1": func(c *AdamWConfig) { c.Beta1 = 1 },
		"beta2 < 0": func(c *AdamWConfig) { c.Beta2 = -0.1 },
		"eps < 0":   func(c *AdamWConfig) { c.Eps = -1e-8 },
		"wd < 0":    func(c *AdamWConfig) { c.WeightDecay = -0.1 },
	} {
		c := fusedAdam()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestDecays(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		want  bool
	}{
		{[]int{50304, 768}, true}, // wte (Vp, C)
		{[]int{1024, 768}, true},  // wpe (maxT, C)
		{[]int{2304, 768}, true},  // qkvw (3C, C)
		{[]int{2304}, false},      // qkvb
		{[]int{768}, false},       // LayerNorm gain or bias
		{[]int{}, false},
	} {
		if got := Decays(tc.shape); got != tc.want {
			t.Errorf("Decays(%v) = %v, want %v", tc.shape, got, tc.want)
		}
	}
}

func TestParams(t *testing.T) {
	cfg := AdamWConfig{LR: 3e-4, Beta1: 0.85, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.1, AdamWMode: true}
	got := cfg.Params(7)
	want := backend.AdamWParams{LR: 3e-4, Beta1: 0.85, Beta2: 0.95, Eps: 1e-6, WeightDecay: 0.1, GradScale: 1, Step: 7}
	if got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("step 0 did not panic")
		}
	}()
	cfg.Params(0)
}

func TestScheduled(t *testing.T) {
	cfg := fusedAdam()
	cfg.LR = 6e-4
	cos, _ := NewWarmupCosineLR(WarmupCosineLRParams{TotalNumSteps: 10, WarmupNumSteps: 2, WarmupType: WarmupLinear})
	cos.Step()
	cos.Step() // t = 1: ratio 1/2 of the base lr
	if got := cfg.Scheduled(cos); got.LR != 3e-4 || got.Beta1 != 0.9 || got.Beta2 != 0.999 {
		t.Errorf("WarmupCosineLR: %+v, want lr 3e-4 and the config's betas", got)
	}
	oc, _ := NewOneCycle(oneCycle(1e-4, 1e-3))
	if got := cfg.Scheduled(oc); got.LR != 1e-4 || got.Beta1 != 0.8 || got.Beta2 != 0.99 {
		t.Errorf("OneCycle at start: %+v, want lr 1e-4 and betas (0.8, 0.99)", got)
	}
	if cfg.LR != 6e-4 {
		t.Error("Scheduled modified its receiver")
	}
}
