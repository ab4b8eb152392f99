package optim

import (
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// AdamWConfig is DeepSpeed's Adam/AdamW optimizer params (FusedAdam and
// DeepSpeedCPUAdam share them); package config fills in their defaults.
type AdamWConfig struct {
	LR           float64 // lr, e.g. 1e-3; the base a scheduler may replace or scale
	Beta1, Beta2 float64 // betas, e.g. 0.9, 0.999
	Eps          float64 // eps, e.g. 1e-8, added outside the sqrt
	WeightDecay  float64 // weight_decay, e.g. 0
	// AdamWMode is adam_w_mode (default true, also for "type": "Adam"):
	// decoupled decay p -= lr·wd·p. False is Adam with L2 regularization,
	// g += wd·p before the moments; backend.AdamW implements only the
	// decoupled form, so Validate accepts false only when WeightDecay is 0,
	// where the two coincide.
	AdamWMode bool
}

// ErrAdamL2 reports adam_w_mode false with a nonzero weight decay.
var ErrAdamL2 = errors.New("adam_w_mode: false (Adam with L2 regularization) with a nonzero weight_decay is not supported: gotrain applies decoupled weight decay only; remove adam_w_mode or set it to true (AdamW), or set weight_decay to 0")

// Validate checks the ranges PyTorch's Adam checks and the L2 restriction.
func (c AdamWConfig) Validate() error {
	switch {
	case !(c.LR >= 0):
		return fmt.Errorf("optimizer: lr %g must be ≥ 0", c.LR)
	case !(c.Beta1 >= 0 && c.Beta1 < 1):
		return fmt.Errorf("optimizer: betas[0] %g must be in [0, 1)", c.Beta1)
	case !(c.Beta2 >= 0 && c.Beta2 < 1):
		return fmt.Errorf("optimizer: betas[1] %g must be in [0, 1)", c.Beta2)
	case !(c.Eps >= 0):
		return fmt.Errorf("optimizer: eps %g must be ≥ 0", c.Eps)
	case !(c.WeightDecay >= 0):
		return fmt.Errorf("optimizer: weight_decay %g must be ≥ 0", c.WeightDecay)
	case !c.AdamWMode && c.WeightDecay != 0:
		return fmt.Errorf("optimizer: %w", ErrAdamL2)
	}
	return nil
}

// Scheduled returns c with the current step's values from s: LR =
// s.LR(c.LR) and, when s cycles momentum (OneCycle), its betas.
func (c AdamWConfig) Scheduled(s Scheduler) AdamWConfig {
	c.LR = s.LR(c.LR)
	if b1, b2, ok := s.Momentum(); ok {
		c.Beta1, c.Beta2 = b1, b2
	}
	return c
}

// Decays reports whether weight decay applies to a tensor of this shape:
// matrices and embeddings (≥ 2 dims) decay, biases and LayerNorm gains
// (1 dim) do not, as in GPT-2 training (nanoGPT's configure_optimizers).
func Decays(shape []int) bool { return len(shape) >= 2 }

// Params builds the backend's hyperparameters for an AdamW update with
// this config (its LR already scheduled, see Scheduled): step is the
// 1-based count of successful updates so far (it drives the bias
// correction 1−β^step, so skipped fp16 steps do not count). WeightDecay is
// the config's, for the tensors that take it (Decays; the caller zeroes it
// for the others) and GradScale is 1 (the caller multiplies in 1/loss_scale
// and the clip coefficient, see ClipCoef). step < 1 is a caller bug
// and panics.
func (c AdamWConfig) Params(step int) backend.AdamWParams {
	if step < 1 {
		panic("optim: AdamW step must be ≥ 1")
	}
	return backend.AdamWParams{
		LR:          float32(c.LR),
		Beta1:       float32(c.Beta1),
		Beta2:       float32(c.Beta2),
		Eps:         float32(c.Eps),
		WeightDecay: float32(c.WeightDecay),
		GradScale:   1,
		Step:        step,
	}
}
