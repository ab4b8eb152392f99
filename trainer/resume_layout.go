package trainer

import (
	"errors"
	"fmt"

	"github.com/gotrain/gotrain/data"
)

// layoutField reports whether a run field only says how an optimizer
// step's samples are split over ranks and micro-steps: the micro-batch
// size and the gradient accumulation (the world size is reported only).
// With the same samples per step taken in the same order (sameSteps), a
// new split changes nothing training computes: the loss and the gradient
// are means over the step's targets, wherever they were processed. That
// is what lets a run move to another cluster, DeepSpeed's universal
// checkpoint case.
func layoutField(name string) bool {
	switch name {
	case "batch.micro", "batch.gradient_accumulation",
		"config.train_micro_batch_size_per_gpu", "config.gradient_accumulation_steps", "config.train_batch_size":
		return true
	}
	return false
}

// sameSteps returns nil when this run's optimizer steps take the same
// samples in the same order as the run that saved the checkpoint (whose
// loader position is pos), whatever the two runs' batch layouts; else why
// not. diffs are the run fields that differ; partial says the checkpoint
// stores no run fields, so the rest could not be compared.
func (r *run) sameSteps(diffs []FieldDiff, pos data.LoaderState, partial bool) error {
	if partial {
		return errors.New("the checkpoint predates the settings gotrain stores, so its data order cannot be checked")
	}
	for _, d := range diffs {
		switch d.Name {
		case "batch.train_batch_size", "seq_len":
			return fmt.Errorf("%s differs, so a step holds other samples", d.Name)
		}
	}
	if r.loader == nil {
		return errors.New("the batches come from the caller (synthetic data), not from shards whose order can be checked")
	}
	if l := r.o.LoRA; l != nil && l.Config.Dropout > 0 {
		return fmt.Errorf("lora_dropout %g draws its masks per rank and micro-step", l.Config.Dropout)
	}
	return r.loader.SameOrderAs(pos)
}
