package metrics

import (
	"errors"
	"fmt"
)

// DeepSpeed's monitor event names (deepspeed/monitor): the engine writes
// these on rank 0 with the global sample count as the x-axis.
const (
	MonitorTrainLoss = "Train/Samples/train_loss"
	MonitorLR        = "Train/Samples/lr"
	MonitorLossScale = "Train/Samples/loss_scale" // fp16 runs only
)

// MonitorEvent is one scalar as DeepSpeed's monitors take it: a name, its
// value and the number of samples trained so far (not the step).
type MonitorEvent struct {
	Name    string
	Value   float64
	Samples int64
}

// Monitor is a DeepSpeed-compatible monitor backend, written by rank 0 only,
// from one goroutine. Write persists its events before returning, so a killed
// run keeps every step it reported.
type Monitor interface {
	Write(events []MonitorEvent) error
	Close() error
}

// StepEvents are the events DeepSpeed's engine reports after an optimizer
// step: train loss and learning rate, and the loss scale when fp16 is on.
// samples is the global sample count after the step (steps × train_batch_size).
func StepEvents(rec StepRecord, samples int64, fp16 bool) []MonitorEvent {
	ev := []MonitorEvent{
		{Name: MonitorTrainLoss, Value: rec.Loss, Samples: samples},
		{Name: MonitorLR, Value: rec.LR, Samples: samples},
	}
	if fp16 {
		ev = append(ev, MonitorEvent{Name: MonitorLossScale, Value: rec.LossScale, Samples: samples})
	}
	return ev
}

// Monitors fans events out to several backends. Every backend sees every
// call; the errors are joined.
type Monitors []Monitor

// Write writes events to each backend.
func (ms Monitors) Write(events []MonitorEvent) error {
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Write(events))
	}
	return errors.Join(errs...)
}

// Close closes each backend.
func (ms Monitors) Close() error {
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}

// UnsupportedMonitorWarning is the warning for an enabled monitor that needs
// a network service (wandb, comet): gotrain runs offline and ignores it.
func UnsupportedMonitorWarning(name string) string {
	return fmt.Sprintf("warning: %s monitor is not supported (no network); its events are not sent — use csv_monitor, tensorboard or metrics.jsonl", name)
}
