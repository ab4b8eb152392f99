package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/optim"
	"github.com/gotrain/gotrain/zero"
)

// optimizer is the optimizer's host side, which the ZeRO engine's step
// runs with: AdamW's settings, the learning-rate schedule, fp16's loss
// scaler, and the counts a checkpoint keeps so that a resume continues
// them bit for bit.
type optimizer struct {
	adamW   optim.AdamWConfig
	sch     optim.Scheduler
	scaler  *optim.LossScaler // fp16 only
	updates int               // successful optimizer updates (AdamW's bias-correction step)
	skipped int               // steps skipped on fp16 overflow
}

// newOptimizer builds the config's optimizer, schedule and loss scaler;
// the loss scaler's notes go to log.
func newOptimizer(c *config.Config, rank int, log io.Writer) (*optimizer, error) {
	var o optimizer
	var err error
	if o.adamW, err = adamWConfig(c.Optimizer); err != nil {
		return nil, err
	}
	if o.sch, err = scheduler(c.Scheduler); err != nil {
		return nil, err
	}
	if o.scaler, err = lossScaler(c, rank, func(msg string) { fmt.Fprintln(log, msg) }); err != nil {
		return nil, err
	}
	return &o, nil
}

// lossScale is fp16's current loss scale, 1 without fp16.
func (o *optimizer) lossScale() float64 {
	if o.scaler == nil {
		return 1
	}
	return o.scaler.Scale()
}

// step runs eng's step with the scheduled hyperparameters (the learning
// rate times lrScale) and advances the loss scaler and the schedule.
// gradScale is the factor the gradients carry (lossSums.gradScale),
// which the engine divides out. An fp16 overflow skips the update and is
// reported, not an error; without fp16 a NaN or Inf gradient is the
// engine's ErrNonFiniteGradients.
func (o *optimizer) step(ctx context.Context, eng *zero.Engine, gradScale, clip, lrScale float64) (lr, norm float64, overflow bool, err error) {
	hp := o.adamW.Scheduled(o.sch)
	hp.LR *= lrScale
	norm, err = eng.Step(ctx, zero.StepInput{AdamW: hp.Params(o.updates + 1), ClipNorm: clip, LossScale: gradScale})
	overflow = errors.Is(err, zero.ErrNonFiniteGradients)
	switch {
	case overflow && o.scaler == nil:
		return hp.LR, norm, false, err
	case err != nil && !overflow:
		return hp.LR, norm, false, err
	}
	if o.scaler != nil {
		// DeepSpeed's dynamic loss scaler: every rank saw the same reduced
		// gradients, so every rank agrees on the overflow.
		skipped, err := o.scaler.Update(overflow)
		if err != nil {
			return hp.LR, norm, overflow, err
		}
		if skipped {
			o.skipped++
		}
	}
	if !overflow {
		o.updates++
		o.sch.Step() // not stepped on fp16 overflow steps, as DeepSpeed
	}
	return hp.LR, norm, overflow, nil
}

// save records the optimizer's state in a checkpoint's trainer state.
func (o *optimizer) save(ts *trainerState) {
	ts.Updates, ts.Skipped, ts.Scheduler = o.updates, o.skipped, o.sch.State()
	if o.scaler != nil {
		st := o.scaler.State()
		ts.Scaler = &st
	}
}

// restore continues from a checkpoint's trainer state.
func (o *optimizer) restore(ts trainerState) error {
	o.updates, o.skipped = ts.Updates, ts.Skipped
	if err := o.sch.Restore(ts.Scheduler); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	if o.scaler != nil && ts.Scaler != nil {
		if err := o.scaler.Restore(*ts.Scaler); err != nil {
			return fmt.Errorf("loss scaler: %w", err)
		}
	}
	return nil
}
