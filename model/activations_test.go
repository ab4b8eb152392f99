package model

import (
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// Attention keeps only out and a (B,NH,T) log-sum-exp per block, so the
// activation plan is linear in T: doubling T at most doubles it (the
// fixed-size logit chunk makes it a little less). A (B,NH,T,T) buffer per
// block, as attention probabilities would need, breaks that at once: at
// GPT-2's shape and T = 1024 it alone would be 12·12·1024²·4 B = 576 MiB.
func TestActivationsLinearInT(t *testing.T) {
	for _, name := range []string{"gpt2-tiny", "gpt2"} {
		cfg := mustPreset(t, name)
		for _, ckpt := range []bool{false, true} {
			const B = 2
			T := cfg.MaxT / 2
			half, full := ActivationBytes(cfg, B, T, backend.BF16, ckpt), ActivationBytes(cfg, B, 2*T, backend.BF16, ckpt)
			if full > 2*half {
				t.Errorf("%s ckpt=%v: %d activation bytes at T=%d, %d at T=%d: more than linear", name, ckpt, half, T, full, 2*T)
			}
			t.Logf("%s ckpt=%v B%d bf16: %.1f MiB at T=%d, %.1f MiB at T=%d", name, ckpt, B,
				float64(half)/(1<<20), T, float64(full)/(1<<20), 2*T)
		}
	}
}
