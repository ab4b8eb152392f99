package optim

import (
	"fmt"
	"math"
)

// LossScalerConfig is DeepSpeed's fp16 block as far as loss scaling goes;
// package config fills in its defaults.
//
// DeepSpeed quirk not reproduced: on its ZeRO path, an fp16 block with none
// of the dynamic-scaling keys makes DeepSpeed fall back to the scaler class
// defaults, initial scale 2^32 and hysteresis 1, instead of the documented
// 2^16 and 2. Here the documented defaults always apply.
type LossScalerConfig struct {
	LossScale             float64 // loss_scale: 0 means dynamic, anything else is a static scale
	InitialScalePower     int     // initial_scale_power: the dynamic scale starts at 2^this, e.g. 16
	LossScaleWindow       int     // loss_scale_window: clean steps between doublings, e.g. 1000
	Hysteresis            int     // hysteresis: overflows halve the scale only from the n-th since the last refill, e.g. 2
	ConsecutiveHysteresis bool    // consecutive_hysteresis: refill hysteresis on every clean step
	MinLossScale          float64 // min_loss_scale, e.g. 1
}

// lossScaleFactor is DeepSpeed's scale_factor: halve on overflow, double
// after a clean window.
const lossScaleFactor = 2

// LossScaleAtMinimumError is returned by Update when gradients overflow
// with the scale already at min_loss_scale and no hysteresis left. Its
// message starts with DeepSpeed's, which users search for.
type LossScaleAtMinimumError struct {
	MinLossScale float64
}

func (e *LossScaleAtMinimumError) Error() string {
	return "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run. " +
		"The gradients overflow at min_loss_scale " + formatScale(e.MinLossScale) +
		": the run has diverged or fp16's range is too small for it. " +
		`Try "bf16": {"enabled": true} instead of fp16, a lower learning rate or a longer warmup, ` +
		"or gradient_clipping (e.g. 1.0)"
}

// LossScalerState is the scaler's checkpointed state, named after
// DeepSpeed's DynamicLossScaler fields.
type LossScalerState struct {
	CurScale         float64 `json:"cur_scale"`
	CurIter          int     `json:"cur_iter"`           // Update calls so far
	LastOverflowIter int     `json:"last_overflow_iter"` // -1 before the first overflow
	CurHysteresis    int     `json:"cur_hysteresis"`
}

// LossScaler is DeepSpeed's fp16 loss scaler: the loss is multiplied by
// Scale() before backward, and Update decides after each optimizer step's
// overflow check whether the step is skipped and how the scale moves.
// Dynamic rules (DeepSpeed's DynamicLossScaler.update_scale):
//
//	overflow, hysteresis == 1 (or configured 1):
//	        scale at min_loss_scale → *LossScaleAtMinimumError
//	        else scale = max(scale/2, min_loss_scale)
//	overflow, hysteresis > 1: hysteresis−−, scale kept
//	        either way last_overflow_iter = iter and the step is skipped
//	clean:  consecutive_hysteresis → hysteresis refilled now;
//	        if (iter − last_overflow_iter) % window == 0: scale ×= 2 and,
//	        without consecutive_hysteresis, hysteresis refilled
//	iter++ after every Update
//
// A static scaler (loss_scale ≠ 0) never changes; overflowing steps are
// still skipped, as DeepSpeed's fp16 optimizers do.
// A LossScaler is not safe for concurrent use.
type LossScaler struct {
	cfg  LossScalerConfig
	rank int
	log  func(msg string)
	st   LossScalerState
}

// NewLossScaler returns a scaler at its initial scale. rank goes into the
// overflow message; log receives one line per overflow (nil: silent; pass
// it on rank 0 only to log once per run, as DeepSpeed does).
func NewLossScaler(cfg LossScalerConfig, rank int, log func(msg string)) (*LossScaler, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("fp16 loss scaler: %w", err)
	}
	s := &LossScaler{cfg: cfg, rank: rank, log: log}
	s.st = LossScalerState{CurScale: cfg.LossScale, LastOverflowIter: -1, CurHysteresis: cfg.Hysteresis}
	if s.Dynamic() {
		s.st.CurScale = math.Ldexp(1, cfg.InitialScalePower)
	}
	return s, nil
}

func (c LossScalerConfig) validate() error {
	if c.LossScale != 0 {
		if !(c.LossScale > 0) || math.IsInf(c.LossScale, 0) {
			return fmt.Errorf("loss_scale %g must be 0 (dynamic) or a positive static scale", c.LossScale)
		}
		return nil
	}
	switch {
	case c.InitialScalePower < 0 || c.InitialScalePower > 126:
		// fp32 losses and gradients times 2^127 and beyond overflow at once.
		return fmt.Errorf("initial_scale_power %d must be in [0, 126], e.g. 16", c.InitialScalePower)
	case c.LossScaleWindow < 1:
		return fmt.Errorf("loss_scale_window %d must be ≥ 1, e.g. 1000", c.LossScaleWindow)
	case c.Hysteresis < 1:
		// DeepSpeed would count hysteresis down past zero and never reduce
		// the scale.
		return fmt.Errorf("hysteresis %d must be ≥ 1, e.g. 2", c.Hysteresis)
	case !(c.MinLossScale > 0) || math.IsInf(c.MinLossScale, 0):
		return fmt.Errorf("min_loss_scale %g must be positive, e.g. 1", c.MinLossScale)
	}
	return nil
}

// Dynamic reports whether the scale adapts (loss_scale 0).
func (s *LossScaler) Dynamic() bool { return s.cfg.LossScale == 0 }

// Scale is the current loss scale: multiply the loss (or its gradient seed)
// by it before backward and unscale the gradients by the same value.
func (s *LossScaler) Scale() float64 { return s.st.CurScale }

// Update applies one optimizer step's overflow result (NaN or Inf in any
// rank's gradients) and reports whether the step must be skipped: exactly
// when overflow is true. The error, with the skip, ends the run: the scale is
// at its minimum and still overflows.
func (s *LossScaler) Update(overflow bool) (skipped bool, err error) {
	if !s.Dynamic() {
		if overflow {
			s.logf("[gotrain] OVERFLOW! Rank %d Skipping step. Loss scale is static: %s", s.rank, formatScale(s.st.CurScale))
		}
		return overflow, nil
	}
	st := &s.st
	if overflow {
		if s.cfg.Hysteresis == 1 || st.CurHysteresis == 1 {
			if st.CurScale == s.cfg.MinLossScale {
				return true, fmt.Errorf("fp16 loss scaler: %w", &LossScaleAtMinimumError{MinLossScale: s.cfg.MinLossScale})
			}
			next := math.Max(st.CurScale/lossScaleFactor, s.cfg.MinLossScale)
			s.logf("[gotrain] OVERFLOW! Rank %d Skipping step. Attempted loss scale: %s, reducing to %s",
				s.rank, formatScale(st.CurScale), formatScale(next))
			st.CurScale = next
		} else {
			s.logf("[gotrain] OVERFLOW! Rank %d Skipping step. Attempted loss scale: %s, but hysteresis is %d. Reducing hysteresis to %d",
				s.rank, formatScale(st.CurScale), st.CurHysteresis, st.CurHysteresis-1)
			st.CurHysteresis--
		}
		st.LastOverflowIter = st.CurIter
	} else {
		if s.cfg.ConsecutiveHysteresis {
			st.CurHysteresis = s.cfg.Hysteresis
		}
		if (st.CurIter-st.LastOverflowIter)%s.cfg.LossScaleWindow == 0 {
			if !s.cfg.ConsecutiveHysteresis {
				st.CurHysteresis = s.cfg.Hysteresis
			}
			st.CurScale *= lossScaleFactor
		}
	}
	st.CurIter++
	return overflow, nil
}

// formatScale prints a scale as DeepSpeed does (int(scale)) when it is a
// whole number, and in full otherwise (a min_loss_scale below 1).
func formatScale(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1<<63 {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%g", v)
}

func (s *LossScaler) logf(format string, args ...any) {
	if s.log != nil {
		s.log(fmt.Sprintf(format, args...))
	}
}

// State is the scaler's state for a checkpoint.
func (s *LossScaler) State() LossScalerState { return s.st }

// Restore puts a checkpointed state back; the config stays the one given
// to NewLossScaler.
func (s *LossScaler) Restore(st LossScalerState) error {
	switch {
	case !(st.CurScale > 0) || math.IsInf(st.CurScale, 0):
		return fmt.Errorf("restore fp16 loss scaler: cur_scale %g is not a positive finite scale", st.CurScale)
	case st.CurIter < 0 || st.LastOverflowIter < -1 || st.LastOverflowIter >= st.CurIter:
		return fmt.Errorf("restore fp16 loss scaler: last_overflow_iter %d must be -1 or below cur_iter %d (≥ 0)",
			st.LastOverflowIter, st.CurIter)
	case s.Dynamic() && (st.CurHysteresis < 1 || st.CurHysteresis > s.cfg.Hysteresis):
		return fmt.Errorf("restore fp16 loss scaler: cur_hysteresis %d must be in [1, hysteresis %d]",
			st.CurHysteresis, s.cfg.Hysteresis)
	}
	s.st = st
	return nil
}
