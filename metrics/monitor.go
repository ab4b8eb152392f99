package metrics

import (
	"errors"
	"fmt"
	"time"
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

// Sync makes what every backend has written durable (at a checkpoint).
func (ms Monitors) Sync() error {
	var errs []error
	for _, m := range ms {
		if s, ok := m.(interface{ Sync() error }); ok {
			errs = append(errs, s.Sync())
		}
	}
	return errors.Join(errs...)
}

// ResumeAt tells every backend that the run resumes after samples samples:
// records beyond it are about to be written again (see logfiles.go).
func (ms Monitors) ResumeAt(samples int64) error {
	var errs []error
	for _, m := range ms {
		if r, ok := m.(interface{ ResumeAt(int64) error }); ok {
			errs = append(errs, r.ResumeAt(samples))
		}
	}
	return errors.Join(errs...)
}

// SetAside tells every backend that a fresh run starts: an earlier run's
// files are moved aside; it returns their new names.
func (ms Monitors) SetAside(now time.Time) ([]string, error) {
	var moved []string
	var errs []error
	for _, m := range ms {
		if r, ok := m.(interface {
			SetAside(time.Time) ([]string, error)
		}); ok {
			names, err := r.SetAside(now)
			moved = append(moved, names...)
			errs = append(errs, err)
		}
	}
	return moved, errors.Join(errs...)
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
	w := fmt.Sprintf("warning: %s monitor is not supported (no network); its events are not sent — use csv_monitor, tensorboard or metrics.jsonl", name)
	if name == "wandb" {
		// W&B's client uploads TensorBoard event files, which gotrain
		// writes: the run reaches W&B without gotrain speaking its API.
		w += "; for Weights & Biases, enable the tensorboard block and upload its event files with `wandb sync --sync-tensorboard -p <project> <output_path>/<job_name>`"
	}
	return w
}
